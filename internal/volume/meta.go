package volume

import (
	"bufio"
	"compress/zlib"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/sysmem"
)

var metaTypes = map[string]string{
	"MET_UCHAR": "uint8", "MET_CHAR": "int8", "MET_USHORT": "uint16", "MET_SHORT": "int16",
	"MET_UINT": "uint32", "MET_INT": "int32", "MET_FLOAT": "float32", "MET_DOUBLE": "float64",
}

// metaHeader is the key = value header of a MetaImage file.
type metaHeader struct {
	dims       [3]int
	spacing    [3]float64
	origin     [3]float64
	etype      string
	bigEndian  bool
	compressed bool
	dataFile   string
	hasSpacing bool
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
// which MetaImage requires to be the last.
func parseMetaHeader(r *bufio.Reader) (metaHeader, error) {
	h := metaHeader{spacing: [3]float64{1, 1, 1}}
	seen := map[string]bool{}
	for lines := 0; ; lines++ {
		if lines > 200 {
			return h, fmt.Errorf("%w: MetaImage header has no ElementDataFile", ErrVolume)
		}
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			return h, fmt.Errorf("%w: MetaImage header ends before ElementDataFile", ErrVolume)
		}
		if len(line) > 4096 {
			return h, fmt.Errorf("%w: MetaImage header line too long", ErrVolume)
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
		seen[k] = true
		var bad error
		switch k {
		case "NDims":
			if v != "3" {
				return h, fmt.Errorf("%w: MetaImage NDims = %s, want 3", ErrVolume, v)
			}
		case "DimSize":
			f, err := parseFloats(v, 3)
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
			f, err := parseFloats(v, 3)
			bad = err
			if err == nil {
				copy(h.spacing[:], f)
				h.hasSpacing = k == "ElementSpacing"
			}
		case "Offset", "Origin", "Position":
			f, err := parseFloats(v, 3)
			bad = err
			if err == nil {
				copy(h.origin[:], f)
			}
		case "ElementType":
			t, ok := metaTypes[v]
			if !ok {
				return h, fmt.Errorf("%w: MetaImage ElementType %s not supported", ErrVolume, v)
			}
			h.etype = t
		case "BinaryDataByteOrderMSB", "ElementByteOrderMSB":
			h.bigEndian = strings.EqualFold(v, "True")
		case "CompressedData":
			h.compressed = strings.EqualFold(v, "True")
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
	return h, nil
}

func loadMeta(path string) (*Volume, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	h, err := parseMetaHeader(br)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var data io.Reader = br
	avail := int64(-1)                   // uncompressed bytes available, where known
	dataPath, dataOff := path, int64(-1) // where the data starts, where known
	switch {
	case h.dataFile == "LOCAL":
		if st, err := f.Stat(); err == nil {
			if pos, err := f.Seek(0, io.SeekCurrent); err == nil {
				avail = st.Size() - pos + int64(br.Buffered())
				dataOff = pos - int64(br.Buffered())
			}
		}
	case strings.EqualFold(h.dataFile, "LIST") || strings.Contains(h.dataFile, "%"):
		return nil, fmt.Errorf("%w: %s: MetaImage ElementDataFile %q (lists of slices) not supported", ErrVolume, path, h.dataFile)
	default:
		dataPath, dataOff = filepath.Join(filepath.Dir(path), filepath.Clean("/" + h.dataFile)[1:]), 0
		df, err := os.Open(dataPath)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: data file: %v", ErrVolume, path, err)
		}
		defer df.Close()
		if st, err := df.Stat(); err == nil {
			avail = st.Size()
		}
		data = bufioReader(df)
	}
	if h.compressed {
		z, err := zlib.NewReader(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: compressed data: %v", ErrVolume, path, err)
		}
		defer z.Close()
		data = z
	}
	el, _ := elementType(h.etype, h.bigEndian)
	need := sysmem.Mul(int64(h.dims[0]), int64(h.dims[1]), int64(h.dims[2]), int64(el.size))
	if h.compressed {
		// The bytes the stream really holds, counted in constant memory
		// before anything is allocated for what the header claims.
		avail = -1
		if dataOff >= 0 && need > 0 && need <= maxVoxels*8 {
			if avail, err = zlibAvail(dataPath, dataOff, need); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrVolume, path, err)
			}
		}
	}
	if avail >= 0 && avail < need {
		return nil, fmt.Errorf("%w: %s: voxel data truncated: the header promises %d bytes, the file holds %d", ErrVolume, path, need, avail)
	}
	v, err := newVolume(h.dims[0], h.dims[1], h.dims[2])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := readVoxels(data, v, el, true); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v.Spacing, v.Origin = h.spacing, h.origin
	return v, nil
}
