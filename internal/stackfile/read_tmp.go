package stackfile

import "github.com/tapeloop/tapeloop/internal/npy"

// TEMPORARY until the readers land.
type Images struct {
	N, Rows, Cols int
	Pix           []float64
	Pixel         [2]float64
}

func Read(path string) (Images, error) {
	h, d, err := npy.ReadAll64(path)
	if err != nil {
		return Images{}, err
	}
	s := h.Shape
	if len(s) == 2 {
		return Images{N: 1, Rows: s[0], Cols: s[1], Pix: d}, nil
	}
	return Images{N: s[0], Rows: s[1], Cols: s[2], Pix: d}, nil
}
