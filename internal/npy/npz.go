package npy

import (
	"archive/zip"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// NPZWriter writes a NumPy .npz archive (a zip of .npy members, stored
// uncompressed, ZIP64 when large), one member at a time.
type NPZWriter struct {
	zw  *zip.Writer
	cur *Writer
}

// NewNPZWriter starts an archive on w.
func NewNPZWriter(w io.Writer) *NPZWriter { return &NPZWriter{zw: zip.NewWriter(w)} }

// Create starts member name (".npy" is appended) and returns its element
// writer; the previous member is finished first.
func (z *NPZWriter) Create(name string, dtype Dtype, shape []int) (*Writer, error) {
	if err := z.finish(); err != nil {
		return nil, err
	}
	f, err := z.zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f, dtype, shape)
	if err != nil {
		return nil, err
	}
	z.cur = w
	return w, nil
}

// CreateRaw starts a member holding raw bytes, such as a JSON document.
func (z *NPZWriter) CreateRaw(name string) (io.Writer, error) {
	if err := z.finish(); err != nil {
		return nil, err
	}
	return z.zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
}

func (z *NPZWriter) finish() error {
	if z.cur == nil {
		return nil
	}
	err := z.cur.Flush()
	z.cur = nil
	return err
}

// Close finishes the last member and writes the zip directory.
func (z *NPZWriter) Close() error {
	if err := z.finish(); err != nil {
		return err
	}
	return z.zw.Close()
}

// NPZ is an open .npz archive.
type NPZ struct {
	zr     *zip.Reader
	closer io.Closer // nil: nothing to close
	path   string
}

// OpenNPZ opens the archive at path.
func OpenNPZ(path string) (*NPZ, error) {
	f, err := OpenFile(path)
	if err != nil { // missing, unreadable, not a regular file: the open says which
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w: not an .npz archive (%v)", path, ErrFormat, err)
	}
	return &NPZ{zr: zr, closer: f, path: path}, nil
}

// Close closes the archive.
func (z *NPZ) Close() error {
	if z.closer == nil {
		return nil
	}
	return z.closer.Close()
}

// Names lists the members, with ".npy" removed as NumPy does.
func (z *NPZ) Names() []string {
	var names []string
	for _, f := range z.zr.File {
		names = append(names, strings.TrimSuffix(f.Name, ".npy"))
	}
	return names
}

func (z *NPZ) member(name string) (*zip.File, error) {
	for _, f := range z.zr.File {
		if f.Name == name || f.Name == name+".npy" {
			return f, nil
		}
	}
	return nil, fmt.Errorf("%s: %w: no member %q", z.path, ErrFormat, name)
}

// Open streams member name as a .npy array; close the returned closer
// when done.
func (z *NPZ) Open(name string) (*Reader, io.Closer, error) {
	f, err := z.member(name)
	if err != nil {
		return nil, nil, err
	}
	rc, err := f.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", z.path, shown(name), err)
	}
	r, err := NewReader(rc)
	if err != nil {
		rc.Close()
		return nil, nil, fmt.Errorf("%s: %s: %w", z.path, shown(name), err)
	}
	if need := uint64(r.hlen) + uint64(r.Len())*uint64(r.Dtype.Size); f.UncompressedSize64 < need {
		rc.Close()
		return nil, nil, fmt.Errorf("%s: %s: %w: data truncated: the header promises %d bytes of %s, the member holds %d",
			z.path, shown(name), ErrFormat, need-uint64(r.hlen), r.Dtype.Name(), f.UncompressedSize64-min(f.UncompressedSize64, uint64(r.hlen)))
	}
	// zip checks a member's CRC-32 only on a read at its end, which a
	// reader taking just the bytes it expects never makes: the read that
	// takes the last element reads on to the end, so that a member
	// damaged on disk or in transfer is an error, not data.
	member := r.r
	r.end = func() error {
		if _, err := io.Copy(io.Discard, member); err != nil {
			return fmt.Errorf("%s: damaged (%w)", shown(name), err)
		}
		return nil
	}
	return r, rc, nil
}

// OpenRaw streams the bytes of member name and returns its size; close
// the reader when done.
func (z *NPZ) OpenRaw(name string) (io.ReadCloser, int64, error) {
	f, err := z.member(name)
	if err != nil {
		return nil, 0, err
	}
	rc, err := f.Open()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %s: %w", z.path, shown(name), err)
	}
	return rc, int64(f.UncompressedSize64), nil
}

// ReadRaw returns the bytes of member name, at most limit of them.
func (z *NPZ) ReadRaw(name string, limit int64) ([]byte, error) {
	f, err := z.member(name)
	if err != nil {
		return nil, err
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", z.path, shown(name), err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %s: %w: member larger than %d bytes", z.path, shown(name), ErrFormat, limit)
	}
	return b, nil
}

// shown is a member's name for a message: quoted when it holds anything
// that would not print on one line (the names come from the archive).
func shown(name string) string {
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return strconv.Quote(name)
		}
	}
	return name
}
