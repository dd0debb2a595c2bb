package volume

// Bounds on what a volume file's header can make tapeloop do: compressed
// data is counted before anything is allocated for the size its header
// claims, and the claimed shape can be read, without reading the data, to
// check it against a memory limit.

import (
	"bufio"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// trailerCheck is how much of a compressed stream past the voxel data is
// read to reach its end and verify its checksum; a stream longer than
// that is not verified.
const trailerCheck = 1 << 16

// inflated counts the bytes a compressed stream (from open) holds, up to
// need, and then reads on to its end (at most trailerCheck more bytes) so
// that a truncated or corrupt stream is an error. It returns the count
// (at most need): what the header's claim can be checked against before
// anything is allocated, whatever the stream's compression ratio. Memory
// is constant: nothing is kept.
func inflated(open func() (io.ReadCloser, error), need int64) (int64, error) {
	rc, err := open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.CopyN(io.Discard, rc, need)
	switch {
	case errors.Is(err, io.EOF): // a whole stream, shorter than the claim: the caller says so
		return n, nil
	case err != nil:
		return n, fmt.Errorf("compressed data truncated or corrupt after %d bytes (%v)", n, err)
	}
	// Junk after the last gzip member (gzip.ErrHeader) was never read
	// before, and is still allowed.
	if _, err := io.CopyN(io.Discard, rc, trailerCheck); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, gzip.ErrHeader) {
		return n, fmt.Errorf("compressed data truncated or corrupt at its end (%v)", err)
	}
	return n, nil
}

// openAt opens path at byte off and returns the file and a buffered
// reader from there.
func openAt(path string, off int64) (*os.File, *bufio.Reader, error) {
	f, err := npy.OpenFile(path)
	if err != nil {
		return nil, nil, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, bufio.NewReaderSize(f, 1<<16), nil
}

// readCloser closes c when the reader r over it is done.
type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// gzipAvail is how many bytes of a .nii.gz the voxel data of its header
// can be read from: the decompressed stream counted up to what the header
// claims (−1 when the header is not one readNIfTI accepts: it says why).
func gzipAvail(path string) (int64, error) {
	open := func() (io.ReadCloser, error) {
		f, br, err := openAt(path, 0)
		if err != nil {
			return nil, err
		}
		gz, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, err
		}
		return readCloser{gz, func() error { gz.Close(); return f.Close() }}, nil
	}
	rc, err := open()
	if err != nil {
		return -1, nil // readNIfTI's own reading says what is wrong
	}
	hdr := make([]byte, 348)
	_, err = io.ReadFull(rc, hdr)
	rc.Close()
	if err != nil {
		return -1, nil
	}
	need := niftiNeed(hdr)
	if need < 0 {
		return -1, nil
	}
	return inflated(open, need)
}

// niftiNeed is the bytes a NIfTI-1 file whose header is hdr must hold
// (header, extensions and voxels), or −1 when the header is not a 3-D
// volume readNIfTI reads.
func niftiNeed(hdr []byte) int64 {
	h, err := parseNIfTIHeader(hdr)
	if err != nil || h.dim[0] < 3 || h.dim[1] < 1 || h.dim[2] < 1 || h.dim[3] < 1 {
		return -1
	}
	typ, ok := niftiTypes[h.datatype]
	if !ok {
		return -1
	}
	el, _ := elementType(typ, h.big)
	off := int64(h.voxOffset)
	if float32(off) != h.voxOffset || off < 348 || off > 1<<24 {
		return -1
	}
	n := sysmem.Mul(int64(h.dim[1]), int64(h.dim[2]), int64(h.dim[3]))
	if n < 0 || n > maxVoxels {
		return -1
	}
	return off + n*int64(el.size)
}

// zlibAvail is how many bytes of voxel data the zlib stream at byte off
// of path holds, counted up to need.
func zlibAvail(path string, off, need int64) (int64, error) {
	return inflated(func() (io.ReadCloser, error) {
		f, br, err := openAt(path, off)
		if err != nil {
			return nil, err
		}
		z, err := zlib.NewReader(br)
		if err != nil {
			f.Close()
			return nil, err
		}
		return readCloser{z, func() error { z.Close(); return f.Close() }}, nil
	}, need)
}

// textLine reports whether a MetaImage header line is text: valid UTF-8
// without control characters other than tab, CR and LF.
func textLine(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\r' && r != '\n' || r == 0x7f {
			return false
		}
	}
	return true
}

// Shape returns the shape the volume file at path claims in its header,
// read as Load would pick its format but without reading any voxel: for
// checking what the volume will take against a memory limit before it is
// read. ok is false when the header cannot be read or says nothing of a
// 3-D shape (and for DICOM series, whose slices are checked against their
// files as they are scanned): Load then says what is wrong.
func Shape(path string, opt Options) (shape [3]int64, ok bool) {
	lower := strings.ToLower(path)
	switch {
	case opt.Series != "" || isDICOM(path):
		return shape, false
	case strings.HasSuffix(lower, ".npy"):
		f, err := npy.Open(path)
		if err != nil {
			return shape, false
		}
		defer f.Close()
		if len(f.Shape) != 3 {
			return shape, false
		}
		return [3]int64{int64(f.Shape[0]), int64(f.Shape[1]), int64(f.Shape[2])}, true
	case strings.HasSuffix(lower, ".nii"), strings.HasSuffix(lower, ".nii.gz"):
		f, br, err := openAt(path, 0)
		if err != nil {
			return shape, false
		}
		defer f.Close()
		var r io.Reader = br
		if strings.HasSuffix(lower, ".gz") {
			gz, err := gzip.NewReader(br)
			if err != nil {
				return shape, false
			}
			defer gz.Close()
			r = gz
		}
		hdr := make([]byte, 348)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return shape, false
		}
		h, err := parseNIfTIHeader(hdr)
		if err != nil || h.dim[0] < 3 || h.dim[1] < 1 || h.dim[2] < 1 || h.dim[3] < 1 {
			return shape, false
		}
		return [3]int64{int64(h.dim[1]), int64(h.dim[2]), int64(h.dim[3])}, true
	case strings.HasSuffix(lower, ".mha"), strings.HasSuffix(lower, ".mhd"):
		f, br, err := openAt(path, 0)
		if err != nil {
			return shape, false
		}
		defer f.Close()
		h, err := parseMetaHeader(br)
		if err != nil || h.ndims != 3 {
			return shape, false
		}
		return [3]int64{int64(h.dims[0]), int64(h.dims[1]), int64(h.dims[2])}, true
	case strings.HasSuffix(lower, ".raw"), opt.Dtype != "" || opt.Shape != [3]int{}:
		s := opt.Shape
		if s[0] < 1 || s[1] < 1 || s[2] < 1 {
			return shape, false
		}
		return [3]int64{int64(s[0]), int64(s[1]), int64(s[2])}, true
	}
	return shape, false
}
