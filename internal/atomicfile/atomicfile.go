// Package atomicfile writes a file so that it appears whole or not at all:
// data goes to a temporary file beside the destination, which is renamed
// over it only on Commit.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is a temporary file that becomes Path on Commit.
type File struct {
	*os.File
	Path string
	done bool
}

// Create opens a temporary file in the directory of path.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{File: f, Path: path}, nil
}

// Commit syncs and closes the temporary file and renames it to Path.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("atomicfile: %s committed or aborted already", f.Path)
	}
	if err := f.File.Sync(); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := f.File.Close(); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return f.Rename()
}

// Abort closes and removes the temporary file; it is a no-op after Commit,
// so it can be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// Close closes the temporary file without renaming it, so that many files
// can be written first and renamed together with Rename.
func (f *File) Close() error { return f.File.Close() }

// Rename moves a closed temporary file to Path.
func (f *File) Rename() error {
	if f.done {
		return fmt.Errorf("atomicfile: %s committed or aborted already", f.Path)
	}
	f.done = true
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := os.Rename(f.Name(), f.Path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return nil
}
