package volume

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// Files lists the files Load reads for path besides path itself, told
// from names and headers alone, before any voxel is read, so that no
// output of a run replaces one of them: a MetaImage header's data file
// (ElementDataFile, resolved as Load resolves it), and for a DICOM series
// (a directory, or one of its files) every DICOM file of its directory,
// whichever series it belongs to. What cannot be read adds nothing: Load
// says what is wrong with it.
func Files(path string, opt Options) []string {
	if path == "" {
		return nil
	}
	lower := strings.ToLower(path)
	switch {
	case opt.Series != "" || isDICOM(path):
		return dicomFiles(path)
	case strings.HasSuffix(lower, ".mha"), strings.HasSuffix(lower, ".mhd"):
		if p := metaDataFile(path); p != "" {
			return []string{p}
		}
	}
	return nil
}

// metaDataFile is the data file the MetaImage header at path names, ""
// when the data is in the header's own file (LOCAL), is not one file
// (LIST, a pattern) or the header cannot be read.
func metaDataFile(path string) string {
	f, err := npy.OpenFile(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h, err := parseMetaHeader(bufio.NewReader(f))
	if err != nil || !separateDataFile(h.dataFile) {
		return ""
	}
	return metaDataPath(path, h.dataFile)
}

// separateDataFile reports whether a MetaImage ElementDataFile names one
// file of its own: not LOCAL, not LIST, not a pattern of slices.
func separateDataFile(name string) bool {
	return name != "" && !strings.EqualFold(name, "LOCAL") && !isSliceList(name)
}

// metaDataPath is the data file name, of the MetaImage header at path, as
// ITK reads it: a relative path from the header's directory, an absolute
// one as it is.
func metaDataPath(path, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(path), name)
}

// dicomFiles is every DICOM Part 10 file ("DICM" at byte 128) in the
// directory path, or in the directory of the file path.
func dicomFiles(path string) []string {
	dir := path
	if st, err := os.Stat(path); err != nil {
		return nil
	} else if !st.IsDir() {
		dir = filepath.Dir(path)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if p := filepath.Join(dir, e.Name()); dicomMagic(p) {
			out = append(out, p)
		}
	}
	return out
}

// dicomMagic reports whether the file at path is a regular file with
// "DICM" at byte 128.
func dicomMagic(path string) bool {
	f, err := npy.OpenFile(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [132]byte
	_, err = io.ReadFull(f, b[:])
	return err == nil && string(b[128:]) == "DICM"
}
