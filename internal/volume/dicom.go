package volume

// A reader for DICOM CT series: a directory of single-frame slices (DICOM
// Part 10 files, "DICM" at byte 128) in implicit or explicit VR little
// endian, read into one Volume.
//
// Index axes: axis 0 runs along the row direction cosine (the first triple
// of ImageOrientationPatient, increasing column index), axis 1 along the
// column direction cosine (the second triple, increasing row index), axis 2
// along the slice normal rowdir × coldir, slices in increasing order of
// their ImagePositionPatient projected on it. So voxel (i, j, k) is pixel
// (row j, column i) of the k-th slice in that order, Origin is that slice's
// ImagePositionPatient (the centre of its first pixel, LPS mm), Spacing is
// (PixelSpacing[1], PixelSpacing[0], distance between slices), and the
// columns of Direction are rowdir, coldir and the normal: the centre of voxel
// (i, j, k) lies at IPP_k + i·PixelSpacing[1]·rowdir + j·PixelSpacing[0]·coldir.
//
// Only the tags needed are decoded; everything else, sequences included
// (defined or undefined lengths, nested), is skipped. Every length is checked
// against the bytes left in the file before anything is read or allocated.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/npy"
)

const (
	syntaxImplicitLE = "1.2.840.10008.1.2"
	syntaxExplicitLE = "1.2.840.10008.1.2.1"
	syntaxDeflated   = "1.2.840.10008.1.2.1.99"
	syntaxExplicitBE = "1.2.840.10008.1.2.2"
)

// compressedSyntaxes names the transfer syntaxes whose pixel data is
// encapsulated (compressed) while the data set itself is explicit VR little
// endian: their headers can be read, their pixels not.
var compressedSyntaxes = map[string]string{
	"1.2.840.10008.1.2.4.50":  "JPEG Baseline (Process 1)",
	"1.2.840.10008.1.2.4.51":  "JPEG Extended (Process 2 & 4)",
	"1.2.840.10008.1.2.4.57":  "JPEG Lossless, Non-Hierarchical (Process 14)",
	"1.2.840.10008.1.2.4.70":  "JPEG Lossless, Non-Hierarchical, First-Order Prediction (Process 14 [Selection Value 1])",
	"1.2.840.10008.1.2.4.80":  "JPEG-LS Lossless",
	"1.2.840.10008.1.2.4.81":  "JPEG-LS Lossy (Near-Lossless)",
	"1.2.840.10008.1.2.4.90":  "JPEG 2000 Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.91":  "JPEG 2000 Image Compression",
	"1.2.840.10008.1.2.4.92":  "JPEG 2000 Part 2 Multi-component Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.93":  "JPEG 2000 Part 2 Multi-component Image Compression",
	"1.2.840.10008.1.2.4.201": "High-Throughput JPEG 2000 Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.202": "High-Throughput JPEG 2000 with RPCL Options Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.203": "High-Throughput JPEG 2000 Image Compression",
	"1.2.840.10008.1.2.5":     "RLE Lossless",
}

// syntaxName names a transfer syntax UID.
func syntaxName(uid string) string {
	switch uid {
	case syntaxImplicitLE:
		return "Implicit VR Little Endian"
	case syntaxExplicitLE:
		return "Explicit VR Little Endian"
	case syntaxDeflated:
		return "Deflated Explicit VR Little Endian"
	case syntaxExplicitBE:
		return "Explicit VR Big Endian"
	}
	if n, ok := compressedSyntaxes[uid]; ok {
		return n
	}
	return "unknown"
}

// convertHint says how to get a series this reader takes.
const convertHint = "convert it first: gdcmconv --raw IN OUT for each file (Debian: libgdcm-tools), or dcm2niix -o OUTDIR DIR and load the .nii"

// Tags read (group << 16 | element).
const (
	tagTransferSyntax   = 0x00020010
	tagSeriesDesc       = 0x0008103E
	tagSliceThickness   = 0x00180050
	tagSeriesUID        = 0x0020000E
	tagIPP              = 0x00200032
	tagIOP              = 0x00200037
	tagSamplesPerPixel  = 0x00280002
	tagNumberOfFrames   = 0x00280008
	tagRows             = 0x00280010
	tagColumns          = 0x00280011
	tagPixelSpacing     = 0x00280030
	tagBitsAllocated    = 0x00280100
	tagBitsStored       = 0x00280101
	tagPixelRep         = 0x00280103
	tagRescaleIntercept = 0x00281052
	tagRescaleSlope     = 0x00281053
	tagPixelData        = 0x7FE00010
	tagItem             = 0xFFFEE000
	tagItemEnd          = 0xFFFEE00D
	tagSequenceEnd      = 0xFFFEE0DD
)

const (
	undefinedLength = 0xFFFFFFFF
	// maxKeptValue bounds the values kept (UIDs, descriptions, numbers).
	maxKeptValue = 1024
	// maxDepth bounds the nesting of sequences.
	maxDepth = 32
)

// dicomSlice is what one file says about its slice.
type dicomSlice struct {
	path   string
	size   int64  // the file's length
	syntax string // transfer syntax UID

	series, description string
	ipp                 [3]float64
	iop                 [6]float64
	pixelSpacing        [2]float64
	thickness           float64
	rows, cols          int
	samples, frames     int
	bitsAllocated       int
	bitsStored          int
	pixelRep            int
	slope, intercept    float64
	seen                map[uint32]bool // which of the tags above were present

	hasPixels   bool
	pixelOffset int64 // where the pixel data's value begins in the file
	pixelLength int64 // its value length; -1: undefined (encapsulated)
}

// dcmParser reads the elements of one file in order.
type dcmParser struct {
	r    *bufio.Reader
	pos  int64 // bytes consumed
	size int64 // the file's length
	s    *dicomSlice
}

var errDICOMTruncated = errors.New("truncated")

// take returns the next n bytes (n ≤ maxKeptValue), valid until the
// next read.
func (p *dcmParser) take(n int) ([]byte, error) {
	if int64(n) > p.size-p.pos {
		return nil, errDICOMTruncated
	}
	b, err := p.r.Peek(n)
	if err != nil {
		return nil, errDICOMTruncated
	}
	p.r.Discard(n)
	p.pos += int64(n)
	return b, nil
}

// skip passes over n bytes.
func (p *dcmParser) skip(n int64) error {
	if n > p.size-p.pos {
		return errDICOMTruncated
	}
	for n > 0 {
		step := int(min(n, 1<<30))
		d, err := p.r.Discard(step)
		p.pos += int64(d)
		n -= int64(d)
		if err != nil {
			return errDICOMTruncated
		}
	}
	return nil
}

// longVR says whether an explicit VR has a reserved 2 bytes and a 4-byte
// length.
func longVR(vr string) bool {
	switch vr {
	case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV", "UC", "UN", "UR", "UT", "UV":
		return true
	}
	return false
}

// header reads an element header: its tag, its VR (explicit VR only; ""
// for items and delimiters) and its value length. atEnd says the file
// ended cleanly before the header.
func (p *dcmParser) header(explicit bool) (tag uint32, vr string, vl uint32, atEnd bool, err error) {
	if p.pos == p.size {
		return 0, "", 0, true, nil
	}
	b, err := p.take(4)
	if err != nil {
		return 0, "", 0, false, err
	}
	tag = uint32(binary.LittleEndian.Uint16(b))<<16 | uint32(binary.LittleEndian.Uint16(b[2:]))
	if tag>>16 == 0xFFFE || !explicit {
		if b, err = p.take(4); err != nil {
			return 0, "", 0, false, err
		}
		return tag, "", binary.LittleEndian.Uint32(b), false, nil
	}
	if b, err = p.take(2); err != nil {
		return 0, "", 0, false, err
	}
	if b[0] < 'A' || b[0] > 'Z' || b[1] < 'A' || b[1] > 'Z' {
		return 0, "", 0, false, fmt.Errorf("element %s has no valid VR (%q)", tagString(tag), b)
	}
	vr = string(b)
	if longVR(vr) {
		if b, err = p.take(6); err != nil {
			return 0, "", 0, false, err
		}
		return tag, vr, binary.LittleEndian.Uint32(b[2:]), false, nil
	}
	if b, err = p.take(2); err != nil {
		return 0, "", 0, false, err
	}
	return tag, vr, uint32(binary.LittleEndian.Uint16(b)), false, nil
}

func tagString(tag uint32) string { return fmt.Sprintf("(%04X,%04X)", tag>>16, tag&0xFFFF) }

// meta reads the preamble and the file meta group, which is always explicit
// VR little endian, and returns the transfer syntax.
func (p *dcmParser) meta() (string, error) {
	b, err := p.take(132)
	if err != nil || string(b[128:132]) != "DICM" {
		return "", fmt.Errorf("not a DICOM file (no \"DICM\" at byte 128)")
	}
	syntax := ""
	for {
		if p.size-p.pos < 2 {
			break
		}
		g, err := p.r.Peek(2)
		if err != nil || binary.LittleEndian.Uint16(g) != 0x0002 {
			break
		}
		tag, _, vl, _, err := p.header(true)
		if err != nil {
			return "", fmt.Errorf("file meta information: %w", err)
		}
		if vl == undefinedLength {
			return "", fmt.Errorf("file meta information: element %s has an undefined length", tagString(tag))
		}
		if tag == tagTransferSyntax {
			if vl > maxKeptValue {
				return "", fmt.Errorf("transfer syntax UID of %d bytes", vl)
			}
			v, err := p.take(int(vl))
			if err != nil {
				return "", fmt.Errorf("file meta information: %w", err)
			}
			syntax = trimValue(v)
			continue
		}
		if err := p.skip(int64(vl)); err != nil {
			return "", fmt.Errorf("file meta information: %w", err)
		}
	}
	if syntax == "" {
		return "", fmt.Errorf("file meta information has no transfer syntax UID (0002,0010)")
	}
	return syntax, nil
}

// dataset reads elements: at depth 0 up to the pixel data or the end of the
// file, deeper up to the item delimiter of an undefined-length item. Only
// depth 0 values are kept.
func (p *dcmParser) dataset(explicit bool, depth int) error {
	for {
		tag, vr, vl, atEnd, err := p.header(explicit)
		if err != nil {
			return err
		}
		if atEnd {
			if depth > 0 {
				return errDICOMTruncated
			}
			return nil
		}
		switch {
		case tag == tagItemEnd && depth > 0:
			return nil
		case tag>>16 == 0xFFFE:
			return fmt.Errorf("unexpected item tag %s in a data set", tagString(tag))
		case tag == tagPixelData && depth == 0:
			p.s.hasPixels = true
			p.s.pixelOffset = p.pos
			p.s.pixelLength = int64(vl)
			if vl == undefinedLength {
				p.s.pixelLength = -1
			}
			return nil
		case vl == undefinedLength:
			// A sequence, or encapsulated data (items of fragments): both
			// are a list of items. A UN sequence is encoded implicit VR.
			inner := explicit
			switch vr {
			case "", "SQ", "OB", "OW":
			case "UN":
				inner = false
			default:
				return fmt.Errorf("element %s (VR %s) has an undefined length", tagString(tag), vr)
			}
			if err := p.sequence(inner, depth+1); err != nil {
				return err
			}
		case depth == 0 && p.wanted(tag):
			if vl > maxKeptValue {
				return fmt.Errorf("element %s holds %d bytes, too many for its kind", tagString(tag), vl)
			}
			v, err := p.take(int(vl))
			if err != nil {
				return err
			}
			if err := p.keep(tag, v); err != nil {
				return err
			}
		default:
			if err := p.skip(int64(vl)); err != nil {
				return err
			}
		}
	}
}

// sequence reads the items of an undefined-length sequence up to its
// delimiter.
func (p *dcmParser) sequence(explicit bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("sequences nested deeper than %d", maxDepth)
	}
	for {
		tag, _, vl, atEnd, err := p.header(explicit)
		if err != nil {
			return err
		}
		switch {
		case atEnd:
			return errDICOMTruncated
		case tag == tagSequenceEnd:
			return nil
		case tag != tagItem:
			return fmt.Errorf("element %s where a sequence item should be", tagString(tag))
		case vl == undefinedLength:
			if err := p.dataset(explicit, depth); err != nil {
				return err
			}
		default:
			if err := p.skip(int64(vl)); err != nil {
				return err
			}
		}
	}
}

func (p *dcmParser) wanted(tag uint32) bool {
	switch tag {
	case tagSeriesDesc, tagSliceThickness, tagSeriesUID, tagIPP, tagIOP, tagSamplesPerPixel,
		tagNumberOfFrames, tagRows, tagColumns, tagPixelSpacing, tagBitsAllocated, tagBitsStored,
		tagPixelRep, tagRescaleIntercept, tagRescaleSlope:
		return true
	}
	return false
}

// trimValue drops the padding (spaces, NULs) around a text value.
func trimValue(v []byte) string { return strings.Trim(string(v), " \x00") }

// decimals parses a DS or IS value of n numbers, each finite.
func decimals(v []byte, n int) ([]float64, error) {
	parts := strings.Split(trimValue(v), `\`)
	if len(parts) != n {
		return nil, fmt.Errorf("want %d numbers, got %q", n, trimValue(v))
	}
	out := make([]float64, n)
	for i, s := range parts {
		x, err := strconv.ParseFloat(strings.Trim(s, " \x00"), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%q is not a finite number", s)
		}
		out[i] = x
	}
	return out, nil
}

// keep decodes a value read at depth 0.
func (p *dcmParser) keep(tag uint32, v []byte) error {
	s := p.s
	var err error
	var x []float64
	switch tag {
	case tagSeriesUID:
		s.series = trimValue(v)
	case tagSeriesDesc:
		s.description = trimValue(v)
	case tagIPP:
		if x, err = decimals(v, 3); err == nil {
			copy(s.ipp[:], x)
		}
	case tagIOP:
		if x, err = decimals(v, 6); err == nil {
			copy(s.iop[:], x)
		}
	case tagPixelSpacing:
		if x, err = decimals(v, 2); err == nil {
			copy(s.pixelSpacing[:], x)
		}
	case tagSliceThickness:
		if x, err := decimals(v, 1); err == nil && x[0] > 0 {
			s.thickness = x[0]
		}
		return nil
	case tagRescaleIntercept:
		if x, err = decimals(v, 1); err == nil {
			s.intercept = x[0]
		}
	case tagRescaleSlope:
		if x, err = decimals(v, 1); err == nil {
			s.slope = x[0]
		}
	case tagNumberOfFrames:
		if x, err = decimals(v, 1); err == nil {
			s.frames = int(min(max(x[0], -1), 1<<20))
		}
	default: // US values
		if len(v) != 2 {
			return fmt.Errorf("element %s holds %d bytes, want a 2-byte unsigned short", tagString(tag), len(v))
		}
		u := int(binary.LittleEndian.Uint16(v))
		switch tag {
		case tagSamplesPerPixel:
			s.samples = u
		case tagRows:
			s.rows = u
		case tagColumns:
			s.cols = u
		case tagBitsAllocated:
			s.bitsAllocated = u
		case tagBitsStored:
			s.bitsStored = u
		case tagPixelRep:
			s.pixelRep = u
		}
	}
	if err != nil {
		return fmt.Errorf("element %s: %v", tagString(tag), err)
	}
	s.seen[tag] = true
	return nil
}

// parseDICOM reads the header of one DICOM file of size bytes from r, up
// to the pixel data.
func parseDICOM(r io.Reader, size int64, path string) (*dicomSlice, error) {
	bufSize := int(min(max(size, 16), 64<<10))
	p := &dcmParser{r: bufio.NewReaderSize(r, bufSize), size: size}
	p.s = &dicomSlice{path: path, size: size, slope: 1, seen: map[uint32]bool{}}
	syntax, err := p.meta()
	if err != nil {
		return nil, err
	}
	p.s.syntax = syntax
	explicit := true
	switch {
	case syntax == syntaxImplicitLE:
		explicit = false
	case syntax == syntaxExplicitLE, compressedSyntaxes[syntax] != "":
	case syntax == syntaxDeflated, syntax == syntaxExplicitBE:
		return nil, fmt.Errorf("transfer syntax %s (%s) is not supported; %s", syntax, syntaxName(syntax), convertHint)
	default:
		return nil, fmt.Errorf("unknown transfer syntax %q; %s", syntax, convertHint)
	}
	if err := p.dataset(explicit, 0); err != nil {
		if err == errDICOMTruncated {
			return nil, fmt.Errorf("DICOM data set truncated at byte %d of %d", p.pos, size)
		}
		return nil, err
	}
	return p.s, nil
}

// isDICOM says whether path is a directory (read as a DICOM series) or a
// DICOM Part 10 file.
func isDICOM(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	return st.IsDir() || dicomMagic(path)
}

// check validates what a slice says about its pixels, and its size against
// the file's length.
func (s *dicomSlice) check() error {
	for _, t := range []struct {
		tag  uint32
		name string
	}{
		{tagIPP, "ImagePositionPatient (0020,0032)"}, {tagIOP, "ImageOrientationPatient (0020,0037)"},
		{tagPixelSpacing, "PixelSpacing (0028,0030)"}, {tagRows, "Rows (0028,0010)"}, {tagColumns, "Columns (0028,0011)"},
		{tagBitsAllocated, "BitsAllocated (0028,0100)"}, {tagPixelRep, "PixelRepresentation (0028,0103)"},
		{tagSamplesPerPixel, "SamplesPerPixel (0028,0002)"},
	} {
		if !s.seen[t.tag] {
			return fmt.Errorf("no %s", t.name)
		}
	}
	if s.samples != 1 {
		return fmt.Errorf("SamplesPerPixel is %d, want 1 (a grey-scale CT slice)", s.samples)
	}
	if s.frames > 1 {
		return fmt.Errorf("a multi-frame image (%d frames) is not supported; dcm2niix -o OUTDIR DIR converts it to NIfTI", s.frames)
	}
	if s.rows < 1 || s.cols < 1 {
		return fmt.Errorf("Rows %d × Columns %d is empty", s.rows, s.cols)
	}
	if s.bitsAllocated != 8 && s.bitsAllocated != 16 && s.bitsAllocated != 32 {
		return fmt.Errorf("BitsAllocated %d is not supported (want 8, 16 or 32)", s.bitsAllocated)
	}
	if !s.seen[tagBitsStored] {
		s.bitsStored = s.bitsAllocated
	}
	if s.bitsStored < 1 || s.bitsStored > s.bitsAllocated {
		return fmt.Errorf("BitsStored %d with BitsAllocated %d", s.bitsStored, s.bitsAllocated)
	}
	if s.pixelRep != 0 && s.pixelRep != 1 {
		return fmt.Errorf("PixelRepresentation %d (want 0 or 1)", s.pixelRep)
	}
	if !(s.pixelSpacing[0] > 0 && s.pixelSpacing[1] > 0) {
		return fmt.Errorf("PixelSpacing %v is not positive", s.pixelSpacing)
	}
	if !(s.slope != 0) {
		return fmt.Errorf("RescaleSlope is 0")
	}
	if !s.hasPixels {
		return fmt.Errorf("no pixel data (7FE0,0010)")
	}
	if s.pixelLength < 0 {
		return fmt.Errorf("pixel data is encapsulated under transfer syntax %s (%s)", s.syntax, syntaxName(s.syntax))
	}
	if s.pixelLength > s.size-s.pixelOffset {
		return fmt.Errorf("file truncated: pixel data of %d bytes at byte %d of %d", s.pixelLength, s.pixelOffset, s.size)
	}
	need := s.planeBytes()
	if s.pixelLength < need {
		return fmt.Errorf("pixel data holds %d bytes; %d rows × %d columns × %d bits need %d", s.pixelLength, s.rows, s.cols, s.bitsAllocated, need)
	}
	return nil
}

// planeBytes is the slice's pixel data size (at most 65535² · 4 bytes).
func (s *dicomSlice) planeBytes() int64 {
	return int64(s.rows) * int64(s.cols) * int64(s.bitsAllocated/8)
}

// decode converts the stored pixels in raw (planeBytes long, row-major) to
// rescaled values in dst: bits above BitsStored are dropped, signed values
// sign-extended from BitsStored, then value = stored·slope + intercept.
func (s *dicomSlice) decode(raw []byte, dst []float32) {
	shift := uint(64 - s.bitsStored)
	signed := s.pixelRep == 1
	bytesPer := s.bitsAllocated / 8
	for i := range dst {
		var u uint64
		switch bytesPer {
		case 1:
			u = uint64(raw[i])
		case 2:
			u = uint64(binary.LittleEndian.Uint16(raw[2*i:]))
		default:
			u = uint64(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		var x float64
		if signed {
			x = float64(int64(u<<shift) >> shift)
		} else {
			x = float64(u << shift >> shift)
		}
		dst[i] = float32(x*s.slope + s.intercept)
	}
}

// readDICOMSlice parses a whole DICOM file held in memory and decodes its
// pixels (what FuzzDICOM exercises).
func readDICOMSlice(b []byte) (*dicomSlice, []float32, error) {
	s, err := parseDICOM(bytes.NewReader(b), int64(len(b)), "")
	if err != nil {
		return nil, nil, err
	}
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	if _, ok := compressedSyntaxes[s.syntax]; ok {
		return nil, nil, fmt.Errorf("compressed")
	}
	dst := make([]float32, s.rows*s.cols)
	s.decode(b[s.pixelOffset:s.pixelOffset+s.planeBytes()], dst)
	return s, dst, nil
}

// scanDICOMFile reads the header of the DICOM file at path; a file that is
// not DICOM Part 10 gives (nil, nil), and one that is not a regular file
// an error matching npy.ErrNotRegular.
func scanDICOMFile(path string) (*dicomSlice, error) {
	f, err := npy.OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var pre [132]byte
	if _, err := io.ReadFull(f, pre[:]); err != nil || string(pre[128:]) != "DICM" {
		return nil, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return parseDICOM(f, st.Size(), path)
}

// dicomSeries is the slices of one SeriesInstanceUID.
type dicomSeries struct {
	dir, uid, description string
	slices                []*dicomSlice
}

// listSeries says which series a directory holds, for an error message.
func listSeries(all []*dicomSeries) string {
	var b strings.Builder
	for i, s := range all {
		if i > 0 {
			b.WriteString(", ")
		}
		uid := s.uid
		if uid == "" {
			uid = "(no SeriesInstanceUID)"
		}
		fmt.Fprintf(&b, "%s %q (%d slices)", uid, s.description, len(s.slices))
	}
	return b.String()
}

// loadDICOM reads a DICOM CT series: path is its directory or one of its
// files (then the series of that file, unless series names another).
// series picks one of several series in a directory by its
// SeriesInstanceUID.
func loadDICOM(path, series string) (*Volume, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	dir := path
	if !st.IsDir() {
		dir = filepath.Dir(path)
		s, err := scanDICOMFile(path)
		if errors.Is(err, npy.ErrNotRegular) {
			return nil, fmt.Errorf("%w: %v", ErrVolume, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrVolume, path, err)
		}
		switch {
		case s == nil:
			return nil, fmt.Errorf("%w: %s is not a DICOM file (no \"DICM\" at byte 128), so --series does not apply", ErrVolume, path)
		case series != "" && series != s.series:
			return nil, fmt.Errorf("%w: %s belongs to series %s, not --series %s", ErrVolume, path, s.series, series)
		case s.series == "":
			return nil, fmt.Errorf("%w: %s has no SeriesInstanceUID (0020,000E); pass its directory, holding only this series", ErrVolume, path)
		}
		series = s.series
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	bySeries := map[string]*dicomSeries{}
	var all []*dicomSeries
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		s, err := scanDICOMFile(p)
		if errors.Is(err, npy.ErrNotRegular) {
			continue // a pipe, device or socket beside the series
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrVolume, p, err)
		}
		if s == nil || !s.hasPixels {
			continue // not DICOM, or no image (DICOMDIR, structured report, …)
		}
		g := bySeries[s.series]
		if g == nil {
			g = &dicomSeries{dir: dir, uid: s.series, description: s.description}
			bySeries[s.series] = g
			all = append(all, g)
		}
		g.slices = append(g.slices, s)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: %s holds no DICOM image files (DICOM Part 10, \"DICM\" at byte 128)", ErrVolume, dir)
	}
	slices.SortFunc(all, func(a, b *dicomSeries) int { return cmp.Compare(a.uid, b.uid) })
	var chosen *dicomSeries
	switch {
	case series != "":
		if chosen = bySeries[series]; chosen == nil {
			return nil, fmt.Errorf("%w: %s holds no series %s; it holds %s", ErrVolume, dir, series, listSeries(all))
		}
	case len(all) == 1:
		chosen = all[0]
	default:
		return nil, fmt.Errorf("%w: %s holds %d DICOM series; pick one with --series UID: %s", ErrVolume, dir, len(all), listSeries(all))
	}
	v, err := assemble(chosen)
	if err != nil {
		name := chosen.uid
		if name == "" {
			name = dir
		}
		return nil, fmt.Errorf("%w: DICOM series %s: %v", ErrVolume, name, err)
	}
	return v, nil
}

// dcmUnit returns x/|x| and |x|.
func dcmUnit(x [3]float64) ([3]float64, float64) {
	n := math.Sqrt(x[0]*x[0] + x[1]*x[1] + x[2]*x[2])
	return [3]float64{x[0] / n, x[1] / n, x[2] / n}, n
}

func dcmDot(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

func dcmCross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

// How to get a series onto a regular grid.
const (
	tiltHint    = "resample it onto an orthogonal grid first, e.g. with dcm2niix -o OUTDIR %s (it writes a tilt-corrected *_Tilt_1.nii when the files carry GantryDetectorTilt (0018,1120)), and load that"
	unevenHint  = "resample it to even spacing first, e.g. with dcm2niix -o OUTDIR %s (it writes an evenly spaced *_Eq_1.nii), and load that"
	stackedHint = "several acquisitions in one series? put the files of one into a directory of their own"
)

// assemble checks that a series' slices form a regular grid and reads their
// pixels.
func assemble(g *dicomSeries) (*Volume, error) {
	first := g.slices[0]
	for _, s := range g.slices {
		if _, ok := compressedSyntaxes[s.syntax]; ok {
			return nil, fmt.Errorf("%s: transfer syntax %s (%s) is compressed; %s", s.path, s.syntax, syntaxName(s.syntax), convertHint)
		}
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("%s: %v", s.path, err)
		}
		if s.rows != first.rows || s.cols != first.cols {
			return nil, fmt.Errorf("%s is %d×%d pixels, %s %d×%d", s.path, s.rows, s.cols, first.path, first.rows, first.cols)
		}
		for a := range 2 {
			if math.Abs(s.pixelSpacing[a]-first.pixelSpacing[a]) > 1e-6*first.pixelSpacing[a] {
				return nil, fmt.Errorf("%s has PixelSpacing %v, %s %v", s.path, s.pixelSpacing, first.path, first.pixelSpacing)
			}
		}
		for a := range 6 {
			if math.Abs(s.iop[a]-first.iop[a]) > 1e-4 {
				return nil, fmt.Errorf("%s has ImageOrientationPatient %v, %s %v", s.path, s.iop, first.path, first.iop)
			}
		}
	}
	// Direction cosines: unit, orthogonal (to 1e-4), then made exactly so.
	row, nr := dcmUnit([3]float64{first.iop[0], first.iop[1], first.iop[2]})
	col, nc := dcmUnit([3]float64{first.iop[3], first.iop[4], first.iop[5]})
	if !(math.Abs(nr-1) <= 1e-4 && math.Abs(nc-1) <= 1e-4 && math.Abs(dcmDot(row, col)) <= 1e-4) {
		return nil, fmt.Errorf("ImageOrientationPatient %v: the row and column cosines are not orthogonal unit vectors", first.iop)
	}
	c := dcmDot(row, col)
	col, _ = dcmUnit([3]float64{col[0] - c*row[0], col[1] - c*row[1], col[2] - c*row[2]})
	normal := dcmCross(row, col)

	// Slices in order along the normal.
	ss := slices.Clone(g.slices)
	pos := func(s *dicomSlice) float64 { return dcmDot(s.ipp, normal) }
	slices.SortStableFunc(ss, func(a, b *dicomSlice) int { return cmp.Compare(pos(a), pos(b)) })
	n := len(ss)
	dx, dy := first.pixelSpacing[1], first.pixelSpacing[0]
	dz := first.thickness
	if n > 1 {
		for k := 1; k < n; k++ {
			if pos(ss[k])-pos(ss[k-1]) < 1e-3 {
				return nil, fmt.Errorf("%s and %s lie at the same position along the slice normal (%g mm): %s", ss[k-1].path, ss[k].path, pos(ss[k]), stackedHint)
			}
		}
		s0 := pos(ss[0])
		dz = (pos(ss[n-1]) - s0) / float64(n-1)
		tol := max(0.01*min(dx, dy, dz), 1e-4)
		// Gantry tilt: the positions step off the normal.
		worst, angle := 0.0, 0.0
		for k := 1; k < n; k++ {
			along := pos(ss[k]) - s0
			var off [3]float64
			for r := range 3 {
				off[r] = ss[k].ipp[r] - ss[0].ipp[r] - along*normal[r]
			}
			_, d := dcmUnit(off)
			if d > worst {
				worst, angle = d, math.Atan2(d, along)*180/math.Pi
			}
		}
		if worst > tol {
			return nil, fmt.Errorf("slice positions step %.3g° off the slice normal (gantry tilt, %.3g mm off at worst); "+tiltHint, angle, worst, g.dir)
		}
		// Uneven spacing: a slice off the regular grid.
		worst, at := 0.0, 0
		for k := range n {
			if d := math.Abs(pos(ss[k]) - s0 - float64(k)*dz); d > worst {
				worst, at = d, k
			}
		}
		if worst > 0.01*dz {
			lo, hi := math.Inf(1), 0.0
			for k := 1; k < n; k++ {
				gap := pos(ss[k]) - pos(ss[k-1])
				lo, hi = min(lo, gap), max(hi, gap)
			}
			return nil, fmt.Errorf("slice spacing is uneven (gaps from %.6g to %.6g mm; %s lies %.3g mm off a regular grid); "+unevenHint, lo, hi, ss[at].path, worst, g.dir)
		}
	}
	if !(dz > 0) {
		dz = 1
	}
	nx, ny := int64(first.cols), int64(first.rows)
	if nx*ny*int64(n) > maxVoxels {
		return nil, fmt.Errorf("%d×%d×%d voxels is too large", nx, ny, n)
	}
	v := &Volume{V: alloc(int(nx * ny * int64(n))), N: [3]int64{nx, ny, int64(n)}, Origin: ss[0].ipp, Spacing: [3]float64{dx, dy, dz}}
	for r := range 3 {
		v.Direction[r] = [3]float64{row[r], col[r], normal[r]}
	}
	if err := readPlanes(v, ss); err != nil {
		return nil, err
	}
	return v, nil
}

// readPlanes reads the slices' pixels into v, a block of slices at a time
// so that the writes along the fastest axis are contiguous.
func readPlanes(v *Volume, ss []*dicomSlice) error {
	nx, ny, nz := v.N[0], v.N[1], v.N[2]
	plane := nx * ny
	const block = 16
	buf := make([]float32, min(int64(block), nz)*plane)
	var most int64
	for _, s := range ss {
		most = max(most, s.planeBytes())
	}
	raw := make([]byte, most)
	for k0 := int64(0); k0 < nz; k0 += block {
		nb := min(block, nz-k0)
		for b := range nb {
			s := ss[k0+b]
			if err := readAt(s.path, s.pixelOffset, raw[:s.planeBytes()]); err != nil {
				return fmt.Errorf("%s: %v", s.path, err)
			}
			s.decode(raw[:s.planeBytes()], buf[b*plane:(b+1)*plane])
		}
		// Pixel (row j, column i) of block slice b goes to voxel (i, j, k0+b).
		for j := range ny {
			for i := range nx {
				dst := v.V[(i*ny+j)*nz+k0:]
				for b := range nb {
					dst[b] = buf[b*plane+j*nx+i]
				}
			}
		}
	}
	return nil
}

func readAt(path string, off int64, dst []byte) error {
	f, err := npy.OpenFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(dst, off); err != nil {
		return fmt.Errorf("reading pixel data: %v", err)
	}
	return nil
}
