package volume

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/warnings"
)

// niftiHeader is what tapeloop reads of a NIfTI-1 header (348 bytes).
type niftiHeader struct {
	big       bool
	dim       [8]int16
	datatype  int16
	pixdim    [8]float32
	voxOffset float32
	sclSlope  float32
	sclInter  float32
	qform     int16
	sform     int16
	quatern   [3]float32 // b, c, d
	qoffset   [3]float32
	srow      [3][4]float32
	units     byte // xyzt_units
}

var niftiTypes = map[int16]string{2: "uint8", 4: "int16", 8: "int32", 16: "float32", 64: "float64", 256: "int8", 512: "uint16", 768: "uint32"}

// parseNIfTIHeader decodes the 348-byte header, detecting its byte order
// from sizeof_hdr.
func parseNIfTIHeader(b []byte) (niftiHeader, error) {
	var h niftiHeader
	if len(b) < 348 {
		return h, fmt.Errorf("%w: NIfTI header truncated", ErrVolume)
	}
	var o binary.ByteOrder = binary.LittleEndian
	switch {
	case binary.LittleEndian.Uint32(b) == 348:
	case binary.BigEndian.Uint32(b) == 348:
		o, h.big = binary.BigEndian, true
	default:
		return h, fmt.Errorf("%w: not a NIfTI-1 file (sizeof_hdr is not 348)", ErrVolume)
	}
	if m := string(b[344:347]); m != "n+1" && m != "ni1" {
		return h, fmt.Errorf("%w: not a NIfTI-1 file (magic %q)", ErrVolume, b[344:348])
	}
	f32 := func(off int) float32 { return math.Float32frombits(o.Uint32(b[off:])) }
	for i := range 8 {
		h.dim[i] = int16(o.Uint16(b[40+2*i:]))
		h.pixdim[i] = f32(76 + 4*i)
	}
	h.datatype = int16(o.Uint16(b[70:]))
	h.voxOffset = f32(108)
	h.units = b[123]
	h.sclSlope, h.sclInter = f32(112), f32(116)
	h.qform, h.sform = int16(o.Uint16(b[252:])), int16(o.Uint16(b[254:]))
	for i := range 3 {
		h.quatern[i] = f32(256 + 4*i)
		h.qoffset[i] = f32(268 + 4*i)
		for j := range 4 {
			h.srow[i][j] = f32(280 + 16*i + 4*j)
		}
	}
	return h, nil
}

// affine returns the header's voxel-centre → RAS mm affine, linear part m
// and translation t, from one source by nibabel's rule: the sform if
// sform_code > 0, else the qform if qform_code > 0, else pixdim alone
// (voxel 0 at the origin, index axes along x, y and z). src names the
// source for messages. The spatial unit of xyzt_units (metre, mm, micron;
// unknown is mm) is converted to mm.
func (h niftiHeader) affine() (m [3][3]float64, t [3]float64, src string, err error) {
	pix := func(a int) float64 { // pixdim[a+1]; 0 reads as 1, as nifti1_io does
		if p := float64(h.pixdim[a+1]); p != 0 {
			return p
		}
		return 1
	}
	switch {
	case h.sform > 0:
		src = "NIfTI sform"
		for r := range 3 {
			for a := range 3 {
				m[r][a] = float64(h.srow[r][a])
			}
			t[r] = float64(h.srow[r][3])
		}
	case h.qform > 0:
		src = "NIfTI qform"
		b, c, d := float64(h.quatern[0]), float64(h.quatern[1]), float64(h.quatern[2])
		w2 := 1 - (b*b + c*c + d*d)
		a := 0.0
		switch {
		case w2 >= 0:
			a = math.Sqrt(w2)
		case w2 > -1e-6: // rounding: a 180° turn, a = 0
			n := math.Sqrt(b*b + c*c + d*d)
			b, c, d = b/n, c/n, d/n
		default:
			return m, t, src, fmt.Errorf("%w: %s: quaternion (b, c, d) = (%g, %g, %g) is longer than 1", ErrVolume, src, b, c, d)
		}
		rot := [3][3]float64{
			{a*a + b*b - c*c - d*d, 2 * (b*c - a*d), 2 * (b*d + a*c)},
			{2 * (b*c + a*d), a*a + c*c - b*b - d*d, 2 * (c*d - a*b)},
			{2 * (b*d - a*c), 2 * (c*d + a*b), a*a + d*d - c*c - b*b},
		}
		zoom := [3]float64{pix(0), pix(1), pix(2)}
		if h.pixdim[0] < 0 { // qfac: the third axis flipped
			zoom[2] = -zoom[2]
		}
		for r := range 3 {
			for a := range 3 {
				m[r][a] = rot[r][a] * zoom[a]
			}
			t[r] = float64(h.qoffset[r])
		}
	default:
		src = "NIfTI pixdim"
		for a := range 3 {
			m[a][a] = pix(a)
		}
	}
	var scale float64
	switch h.units & 7 {
	case 1: // metre
		scale = 1000
	case 3: // micron
		scale = 1e-3
	default: // mm, or unknown
		scale = 1
	}
	for r := range 3 {
		for a := range 3 {
			m[r][a] *= scale
			if math.IsNaN(m[r][a]) || math.IsInf(m[r][a], 0) {
				return m, t, src, fmt.Errorf("%w: %s is not finite", ErrVolume, src)
			}
		}
		t[r] *= scale
		if math.IsNaN(t[r]) || math.IsInf(t[r], 0) {
			return m, t, src, fmt.Errorf("%w: %s offset is not finite", ErrVolume, src)
		}
	}
	return m, t, src, nil
}

// geometry is the header's origin, spacing and direction in LPS mm: the
// affine (see affine) split into spacing and direction cosines, with x and
// y negated to turn NIfTI's RAS into LPS.
func (h niftiHeader) geometry() (origin, spacing [3]float64, dir [3][3]float64, src string, err error) {
	m, t, src, err := h.affine()
	if err != nil {
		return origin, spacing, dir, src, err
	}
	if spacing, dir, err = fromAffine(m, src); err != nil {
		return origin, spacing, dir, src, err
	}
	origin = t
	for r := range 2 {
		origin[r] = -origin[r]
		for a := range 3 {
			dir[r][a] = -dir[r][a]
		}
	}
	return origin, spacing, dir, src, nil
}

// loadNIfTI reads a .nii or .nii.gz file; with place, its affine too.
func loadNIfTI(path string, warn io.Writer, place bool) (*Volume, error) {
	f, err := npy.OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var r io.Reader = br
	avail := int64(-1) // bytes in the file, where known before decompressing
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		avail = st.Size()
	}
	// A gzip stream named .nii is read as ITK's NIfTI reader reads it:
	// decompressed (its first bytes tell, whatever the name).
	magic, _ := br.Peek(2)
	if strings.HasSuffix(strings.ToLower(path), ".gz") || (len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		// The bytes the stream really holds, counted in constant memory
		// before anything is allocated for what its header claims.
		if avail, err = gzipAvail(path); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrVolume, path, err)
		}
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrVolume, path, err)
		}
		defer gz.Close()
		r = bufio.NewReaderSize(gz, 1<<20)
	}
	v, err := readNIfTI(r, warn, path, avail, place)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readNIfTI reads a single-file NIfTI-1 volume (header, extensions, data)
// of avail bytes in all (−1: unknown), checking the size before allocating.
func readNIfTI(r io.Reader, warn io.Writer, name string, avail int64, place bool) (*Volume, error) {
	hdr := make([]byte, 348)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("%w: NIfTI header truncated", ErrVolume)
	}
	h, err := parseNIfTIHeader(hdr)
	if err != nil {
		return nil, err
	}
	if string(hdr[344:347]) != "n+1" {
		return nil, fmt.Errorf("%w: a .hdr/.img pair (magic ni1) is not supported; convert to .nii", ErrVolume)
	}
	nd := h.dim[0]
	if nd < 3 || nd > 7 || h.dim[1] < 1 || h.dim[2] < 1 || h.dim[3] < 1 {
		return nil, fmt.Errorf("%w: NIfTI dims %v: want a 3-D volume", ErrVolume, h.dim[:max(1, min(int(nd)+1, 8))])
	}
	for i := int16(4); i <= nd; i++ {
		if h.dim[i] > 1 {
			return nil, fmt.Errorf("%w: NIfTI dims %v: a %d-D series, want one 3-D volume", ErrVolume, h.dim[:nd+1], nd)
		}
	}
	typ, ok := niftiTypes[h.datatype]
	if !ok {
		return nil, fmt.Errorf("%w: NIfTI datatype %d not supported", ErrVolume, h.datatype)
	}
	el, _ := elementType(typ, h.big)
	off := int64(h.voxOffset)
	if float32(off) != h.voxOffset || off < 348 || off > 1<<24 {
		return nil, fmt.Errorf("%w: NIfTI vox_offset %g is invalid", ErrVolume, h.voxOffset)
	}
	need := off + int64(h.dim[1])*int64(h.dim[2])*int64(h.dim[3])*int64(el.size)
	if avail >= 0 && avail < need {
		return nil, fmt.Errorf("%w: NIfTI data truncated: the header promises %d bytes, the file holds %d", ErrVolume, need, avail)
	}
	if avail > need { // known exactly for an uncompressed file
		extraData(warn, name, "the file holds", avail, need, "dims and datatype")
	}
	if _, err := io.CopyN(io.Discard, r, off-348); err != nil {
		return nil, fmt.Errorf("%w: NIfTI file ends before its data", ErrVolume)
	}
	v, err := newVolume(int(h.dim[1]), int(h.dim[2]), int(h.dim[3]))
	if err != nil {
		return nil, err
	}
	if err := readVoxels(r, v, el, true); err != nil {
		return nil, err
	}
	if s, c := float64(h.sclSlope), float64(h.sclInter); s != 0 && !math.IsNaN(s) && (s != 1 || c != 0) {
		for i, x := range v.V {
			v.V[i] = float32(float64(x)*s + c)
		}
	}
	if !place {
		return v, nil
	}
	var src string
	if v.Origin, v.Spacing, v.Direction, src, err = h.geometry(); err != nil {
		return nil, err
	}
	if src == "NIfTI pixdim" && warn != nil {
		warnings.Printf(warn, "%s: the NIfTI header has neither an sform nor a qform; voxel 0 placed at the origin, index axes along RAS x, y and z, pixdim apart", name)
	}
	return v, nil
}

// niftiBytes is a test and fuzz helper: the header parser on raw bytes.
func niftiBytes(b []byte) (*Volume, error) {
	return readNIfTI(bytes.NewReader(b), nil, "fuzz", int64(len(b)), true)
}
