package stackfile

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// Images is a stack of N images of Rows×Cols read from a file.
type Images struct {
	N, Rows, Cols int
	// Pix holds the N·Rows·Cols pixels, image after image, row after row
	// (an (N, Rows, Cols) array in C order), as the file holds them
	// converted to float64: exactly, except 64-bit integers beyond 2⁵³.
	// Non-finite values are kept.
	Pix []float64
	// Pixel is the spacing in mm between columns and between rows when the
	// file says it, else 0 (both). A MetaImage says it with
	// ElementSpacing (the one NewMHA writes says 1 mm when the stack's
	// spacing was unknown); a TIFF with XResolution and YResolution in
	// pixels per inch or cm, or per ImageJ's unit; a .npy never does.
	Pixel [2]float64
}

// Read reads the stack of images in the file at path, choosing the
// reader by the extension (any case):
//
//   - .npy: an (N, Rows, Cols) array, or one image of (Rows, Cols), of any
//     dtype package npy reads (bool, integers, float16/32/64, either byte
//     order, C or Fortran order);
//   - .mha, .mhd: a MetaImage of DimSize Cols Rows N (x, the fastest axis,
//     along the columns, as NewMHA writes it) or Cols Rows (one image),
//     of any scalar ElementType, its data in the file (LOCAL) or a data
//     file, zlib-compressed or not;
//   - .tif, .tiff: a TIFF (classic or BigTIFF, either byte order) of one
//     page per image, every page the same size, uncompressed strips of
//     one grey sample per pixel (BlackIsZero or WhiteIsZero, the values
//     as stored): 8-, 16- or 32-bit integers (signed or not) or 32- or
//     64-bit IEEE floats. Anything else (compression, tiles, colour,
//     pages of differing sizes) is refused, saying what it is.
//
// Sizes and offsets a file claims are checked against what it holds
// before anything is allocated for them.
func Read(path string) (Images, error) {
	var im Images
	var err error
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".npy":
		im, err = readNPY(path)
	case ".mha", ".mhd":
		im, err = readMeta(path)
	case ".tif", ".tiff":
		im, err = readTIFF(path)
	default:
		return Images{}, fmt.Errorf("stackfile: %s: unknown image format %q (want .npy, .mha, .mhd, .tif or .tiff)", path, ext)
	}
	if err != nil {
		return Images{}, fmt.Errorf("stackfile: %w", err)
	}
	return im, nil
}

// shape sets the stack's size, refusing an empty one.
func (im *Images) shape(path string, n, rows, cols int) error {
	if n < 1 || rows < 1 || cols < 1 {
		return fmt.Errorf("%s: %d images of %dx%d: want at least one pixel", path, n, rows, cols)
	}
	im.N, im.Rows, im.Cols = n, rows, cols
	return nil
}

// readNPY reads an (N, Rows, Cols) or (Rows, Cols) .npy file. package npy
// has checked its size against the header's shape when it opens it.
func readNPY(path string) (Images, error) {
	f, err := npy.Open(path)
	if err != nil {
		return Images{}, err
	}
	defer f.Close()
	var im Images
	switch s := f.Shape; len(s) {
	case 2:
		err = im.shape(path, 1, s[0], s[1])
	case 3:
		err = im.shape(path, s[0], s[1], s[2])
	default:
		err = fmt.Errorf("%s: shape %s: want (images, rows, cols), or (rows, cols) for one image", path, npy.ShapeString(s))
	}
	if err != nil {
		return Images{}, err
	}
	im.Pix = make([]float64, f.Len())
	if _, err := f.Read64(im.Pix); err != nil {
		return Images{}, fmt.Errorf("%s: %w", path, err)
	}
	return im, nil
}

// readMeta reads a 3-D MetaImage of DimSize Cols Rows N, or a 2-D one of
// Cols Rows: its elements, x fastest, are the stack in C order.
func readMeta(path string) (Images, error) {
	m, err := volume.OpenMetaImage(path, nil)
	if err != nil {
		return Images{}, err
	}
	defer m.Close()
	var im Images
	d := m.Dims
	n := 1
	if len(d) == 3 {
		n = d[2]
	}
	if err := im.shape(path, n, d[1], d[0]); err != nil {
		return Images{}, err
	}
	if s := m.Spacing; s != nil {
		for _, x := range s[:2] {
			if !(x > 0) || math.IsInf(x, 0) {
				return Images{}, fmt.Errorf("%s: MetaImage ElementSpacing %v: want positive, finite sizes", path, s)
			}
		}
		im.Pixel = [2]float64{s[0], s[1]}
	}
	im.Pix = make([]float64, n*d[1]*d[0])
	if err := m.Read64(im.Pix); err != nil {
		return Images{}, err
	}
	return im, nil
}
