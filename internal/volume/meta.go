package volume

import (
	"bufio"
	"compress/zlib"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

var metaTypes = map[string]string{
	"MET_UCHAR": "uint8", "MET_CHAR": "int8", "MET_USHORT": "uint16", "MET_SHORT": "int16",
	"MET_UINT": "uint32", "MET_INT": "int32", "MET_FLOAT": "float32", "MET_DOUBLE": "float64",
}

// metaKeys are the header keys the reader uses: given twice, one of the
// two values would be ignored, so the header is refused. Others (Comment,
// …) are ignored anyway.
var metaKeys = map[string]bool{
	"NDims": true, "DimSize": true, "ElementSpacing": true, "ElementSize": true,
	"Offset": true, "Origin": true, "Position": true, "TransformMatrix": true, "Rotation": true, "Orientation": true,
	"HeaderSize": true, "ElementType": true, "BinaryDataByteOrderMSB": true, "ElementByteOrderMSB": true,
	"CompressedData": true, "ElementNumberOfChannels": true, "BinaryData": true,
}

// metaBool reads a MetaImage True or False (any case).
func metaBool(v string) (bool, error) {
	switch {
	case strings.EqualFold(v, "True"):
		return true, nil
	case strings.EqualFold(v, "False"):
		return false, nil
	}
	return false, fmt.Errorf("want True or False, got %q", v)
}

// metaHeader is the key = value header of a MetaImage file.
type metaHeader struct {
	ndims   int    // 2 or 3; a 2-D header's third size is 1
	dims    [3]int // DimSize, x (the fastest axis) first
	spacing [3]float64
	origin  [3]float64 // Offset (Origin, Position): the centre of voxel 0
	// transform is TransformMatrix (Rotation, Orientation) as written:
	// the direction of index axis a in transform[3a : 3a+3].
	transform    [9]float64
	hasTransform bool
	headerSize   int64 // bytes before the data; −1: the data ends the file
	etype        string
	bigEndian    bool
	compressed   bool
	dataFile     string
	hasSpacing   bool // ElementSpacing given
	spacingGiven bool // ElementSpacing or ElementSize given
}

func parseFloats(v string, n int) ([]float64, error) {
	f := strings.Fields(v)
	if len(f) != n {
		return nil, fmt.Errorf("want %d numbers, got %q", n, v)
	}
	out := make([]float64, n)
	for i, s := range f {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", s)
		}
		out[i] = x
	}
	return out, nil
}

// parseMetaHeader reads header lines up to and including ElementDataFile,
// which MetaImage requires to be the last. NDims is 2 or 3 (3 when not
// given), and comes before the keys whose number of values it sets, as
// ITK writes it: DimSize, ElementSpacing (ElementSize) and Offset take
// NDims numbers, TransformMatrix NDims² (a 2-D one fills the upper left
// of the 3-D matrix).
func parseMetaHeader(r *bufio.Reader) (metaHeader, error) {
	h := metaHeader{ndims: 3, spacing: [3]float64{1, 1, 1}}
	seen := map[string]bool{}
	sized := "" // the first key whose number of values NDims sets
	for lines := 0; ; lines++ {
		if lines > 200 {
			return h, fmt.Errorf("%w: MetaImage header has no ElementDataFile", ErrVolume)
		}
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			return h, fmt.Errorf("%w: MetaImage header ends before ElementDataFile", ErrVolume)
		}
		if len(line) > 4096 {
			if !textLine(line[:4096]) || !strings.Contains(line[:4096], "=") {
				return h, fmt.Errorf("%w: MetaImage header ends without ElementDataFile: line %d is data", ErrVolume, lines+1)
			}
			return h, fmt.Errorf("%w: MetaImage header line %d is too long (over 4096 bytes)", ErrVolume, lines+1)
		}
		if !textLine(line) {
			return h, fmt.Errorf("%w: MetaImage header ends without ElementDataFile: line %d is binary data", ErrVolume, lines+1)
		}
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), "=")
		if !ok {
			if strings.TrimSpace(line) == "" {
				continue
			}
			return h, fmt.Errorf("%w: MetaImage header line %q is not key = value", ErrVolume, strings.TrimSpace(line))
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if seen[k] && metaKeys[k] {
			return h, fmt.Errorf("%w: MetaImage header gives %s twice", ErrVolume, k)
		}
		seen[k] = true
		var bad error
		switch k {
		case "DimSize", "ElementSpacing", "ElementSize", "Offset", "Origin", "Position", "TransformMatrix", "Rotation", "Orientation":
			if sized == "" {
				sized = k
			}
		}
		switch k {
		case "NDims":
			switch v {
			case "2", "3":
				h.ndims = int(v[0] - '0')
			default:
				return h, fmt.Errorf("%w: MetaImage NDims = %s, want 3 (or 2 for one image)", ErrVolume, v)
			}
			if sized != "" && h.ndims != 3 {
				return h, fmt.Errorf("%w: MetaImage NDims = %s comes after %s, which was read with 3 values", ErrVolume, v, sized)
			}
		case "DimSize":
			h.dims[2] = 1
			f, err := parseFloats(v, h.ndims)
			bad = err
			for i := range f {
				h.dims[i] = int(f[i])
				if f[i] != float64(h.dims[i]) || f[i] < 1 {
					bad = fmt.Errorf("bad size %q", v)
				}
			}
		case "ElementSpacing", "ElementSize":
			if k == "ElementSize" && h.hasSpacing {
				continue
			}
			f, err := parseFloats(v, h.ndims)
			bad = err
			if err == nil {
				copy(h.spacing[:], f)
				h.hasSpacing = k == "ElementSpacing"
				h.spacingGiven = true
			}
		case "Offset", "Origin", "Position":
			f, err := parseFloats(v, h.ndims)
			bad = err
			if err == nil {
				copy(h.origin[:], f)
			}
		case "TransformMatrix", "Rotation", "Orientation":
			f, err := parseFloats(v, h.ndims*h.ndims)
			bad = err
			if err == nil {
				h.transform = [9]float64{8: 1}
				for a := range h.ndims {
					copy(h.transform[3*a:], f[a*h.ndims:(a+1)*h.ndims])
				}
				h.hasTransform = true
			}
		case "HeaderSize":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < -1 {
				bad = fmt.Errorf("want a byte count or -1, got %q", v)
			}
			h.headerSize = n
		case "ElementType":
			t, ok := metaTypes[v]
			if !ok {
				return h, fmt.Errorf("%w: MetaImage ElementType %s not supported", ErrVolume, v)
			}
			h.etype = t
		case "BinaryDataByteOrderMSB", "ElementByteOrderMSB":
			h.bigEndian, bad = metaBool(v)
		case "CompressedData":
			h.compressed, bad = metaBool(v)
		case "BinaryData":
			binary, err := metaBool(v)
			if bad = err; err == nil && !binary {
				return h, fmt.Errorf("%w: MetaImage BinaryData = %s: voxels written as text are not supported; save the volume with binary data", ErrVolume, v)
			}
		case "ElementNumberOfChannels":
			if v != "1" {
				return h, fmt.Errorf("%w: MetaImage with %s channels, want 1", ErrVolume, v)
			}
		case "ElementDataFile":
			h.dataFile = v
		}
		if bad != nil {
			return h, fmt.Errorf("%w: MetaImage %s: %v", ErrVolume, k, bad)
		}
		if k == "ElementDataFile" {
			break
		}
	}
	if !seen["DimSize"] || h.etype == "" {
		return h, fmt.Errorf("%w: MetaImage header lacks DimSize or ElementType", ErrVolume)
	}
	if h.headerSize == -1 && h.compressed {
		return h, fmt.Errorf("%w: MetaImage HeaderSize = -1 with CompressedData is not supported", ErrVolume)
	}
	return h, nil
}

// direction is the header's direction matrix (columns: the index axes'
// directions in LPS), the identity without a TransformMatrix. ITK writes
// the direction of index axis a as the a-th triple of TransformMatrix.
func (h metaHeader) direction() ([3][3]float64, error) {
	if !h.hasTransform {
		return identity, nil
	}
	var d [3][3]float64
	for a := range 3 {
		for r := range 3 {
			d[r][a] = h.transform[3*a+r]
		}
	}
	return orthonormal(d, "MetaImage TransformMatrix")
}

// seekData positions f at the first data byte for a header size of hs
// (−1: the data is the last need bytes) and returns the bytes from there
// to the end. Data inside a .mha (LOCAL) starts no earlier than minStart,
// the end of its header.
func seekData(f *os.File, hs, need, minStart int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	start := hs
	if hs == -1 {
		start = st.Size() - need
		if start < minStart {
			return 0, fmt.Errorf("%w: voxel data truncated: HeaderSize = -1 and the file holds %d bytes after its header, the header promises %d", ErrVolume, max(0, st.Size()-minStart), need)
		}
	} else if start < minStart {
		return 0, fmt.Errorf("%w: MetaImage HeaderSize = %d points inside the header (%d bytes)", ErrVolume, hs, minStart)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	return st.Size() - start, nil
}

// loadMeta reads a .mha or .mhd file; with place, its placement too.
func loadMeta(path string, warn io.Writer, place bool) (*Volume, error) {
	f, br, h, err := openMetaHeader(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if h.ndims != 3 {
		return nil, fmt.Errorf("%s: %w: MetaImage NDims = %d: one image, want a 3-D volume", path, ErrVolume, h.ndims)
	}
	dir := identity
	if place {
		if dir, err = h.direction(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	} else {
		h.spacing, h.origin = [3]float64{1, 1, 1}, [3]float64{}
	}
	data, el, done, err := openMetaData(path, f, br, h, warn)
	if err != nil {
		return nil, err
	}
	defer done()
	v, err := newVolume(h.dims[0], h.dims[1], h.dims[2])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := readVoxels(data, v, el, true); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v.Spacing, v.Origin, v.Direction = h.spacing, h.origin, dir
	return v, nil
}

// openMetaHeader opens the MetaImage file at path and reads its header;
// the returned reader continues after it.
func openMetaHeader(path string) (*os.File, *bufio.Reader, metaHeader, error) {
	f, err := npy.OpenFile(path)
	if err != nil {
		return nil, nil, metaHeader{}, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	h, err := parseMetaHeader(br)
	if err != nil {
		f.Close()
		return nil, nil, h, fmt.Errorf("%s: %w", path, err)
	}
	return f, br, h, nil
}

// openMetaData returns the element stream of the MetaImage at path, whose
// header h was read from f through br, and the element type, once the
// size h claims is checked against the bytes there are (compressed data
// counted in constant memory): no more than the file holds is ever
// allocated for. done releases what the stream holds open besides f.
func openMetaData(path string, f *os.File, br *bufio.Reader, h metaHeader, warn io.Writer) (data io.Reader, el element, done func(), err error) {
	var closers []io.Closer
	done = func() {
		for _, c := range slices.Backward(closers) {
			c.Close()
		}
	}
	fail := func(err error) (io.Reader, element, func(), error) {
		done()
		return nil, element{}, nil, err
	}
	if float64(h.dims[0])*float64(h.dims[1])*float64(h.dims[2]) > maxVoxels {
		return fail(fmt.Errorf("%w: %s: shape %v is too large", ErrVolume, path, h.dims[:h.ndims]))
	}
	el, _ = elementType(h.etype, h.bigEndian)
	need := sysmem.Mul(int64(h.dims[0]), int64(h.dims[1]), int64(h.dims[2]), int64(el.size))
	data = br
	avail := int64(-1)                   // bytes available from the data's start, where known
	dataPath, dataOff := path, int64(-1) // where the data starts, where known
	switch {
	case strings.EqualFold(h.dataFile, "LOCAL"):
		pos, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			break
		}
		end := pos - int64(br.Buffered()) // the end of the header
		if h.headerSize == 0 {
			if st, err := f.Stat(); err == nil {
				avail = st.Size() - end
			}
			dataOff = end
			break
		}
		// ITK reads HeaderSize in a .mha as the data's offset from the
		// start of the file.
		if avail, err = seekData(f, h.headerSize, need, end); err != nil {
			return fail(fmt.Errorf("%s: %w", path, err))
		}
		if dataOff, err = f.Seek(0, io.SeekCurrent); err != nil {
			dataOff = -1
		}
		data = bufioReader(f)
	case isSliceList(h.dataFile):
		return fail(fmt.Errorf("%w: %s: MetaImage ElementDataFile %q: the voxels are in one file per slice, which tapeloop does not read; "+
			"write the volume as one file (a .mha, or a .mhd with one data file: SimpleITK.WriteImage does)", ErrVolume, path, h.dataFile))
	default:
		// As ITK reads it: a relative path from the header's directory, an
		// absolute one as it is.
		dataPath = metaDataPath(path, h.dataFile)
		df, err := npy.OpenFile(dataPath)
		if err != nil {
			return fail(fmt.Errorf("%w: %s: data file: %v", ErrVolume, path, err))
		}
		closers = append(closers, df)
		if avail, err = seekData(df, h.headerSize, need, 0); err != nil {
			return fail(fmt.Errorf("%s: data file: %w", path, err))
		}
		if dataOff, err = df.Seek(0, io.SeekCurrent); err != nil {
			dataOff = -1
		}
		data = bufioReader(df)
	}
	if h.compressed {
		z, err := zlib.NewReader(data)
		if err != nil {
			return fail(fmt.Errorf("%w: %s: compressed data: %v", ErrVolume, path, err))
		}
		closers = append(closers, z)
		data = z
		// The bytes the stream really holds, counted in constant memory
		// before anything is allocated for what the header claims.
		avail = -1
		if dataOff >= 0 && need > 0 && need <= maxVoxels*8 {
			if avail, err = zlibAvail(dataPath, dataOff, need); err != nil {
				return fail(fmt.Errorf("%w: %s: %v", ErrVolume, path, err))
			}
		}
	}
	if avail >= 0 && avail < need {
		in := "the file"
		if dataPath != path {
			in = "its data file " + dataPath
		}
		return fail(fmt.Errorf("%w: %s: voxel data truncated: the header promises %d bytes, %s holds %d", ErrVolume, path, need, in, avail))
	}
	if avail > need { // known exactly for uncompressed data
		in := "the file holds"
		if dataPath != path {
			in = "its data file " + dataPath + " holds"
		}
		extraData(warn, path, in, avail, need, "DimSize and ElementType")
	}
	return data, el, done, nil
}

// isSliceList says an ElementDataFile names one file per slice: LIST (with
// or without the dimension of its files, LIST 2D) or a printf pattern of
// file names (slice%03d.raw 1 40 1).
func isSliceList(dataFile string) bool {
	f := strings.Fields(dataFile)
	return len(f) > 0 && strings.EqualFold(f[0], "LIST") || strings.Contains(dataFile, "%")
}
