package plot

import (
	"errors"
	"fmt"
	"io"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// readRows reads the next len(dst) values of r.
func readRows(r *npy.Reader, dst []float64) error {
	n, err := r.Read64(dst)
	if n == len(dst) && (err == nil || errors.Is(err, io.EOF)) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readNpy reads a 2-D array as an affinity matrix and a 3-D one as a
// stack of DRRs.
func readNpy(path string) (figure, error) {
	f, err := npy.Open(path)
	if err != nil {
		return figure{}, err
	}
	defer f.Close()
	var fig figure
	switch sh := f.Shape; len(sh) {
	case 2:
		fig, err = readMatrix(f.Reader, sh[0], sh[1])
	case 3:
		fig, err = readStack(f.Reader, sh[0], sh[1], sh[2])
	default:
		return figure{}, fmt.Errorf("%s: %w: an array of shape %s: want an affinity matrix (N, N) or a DRR stack (poses, rows, columns)", path, ErrInput, npy.ShapeString(sh))
	}
	if err != nil {
		return figure{}, fmt.Errorf("%s: %w", path, err)
	}
	return fig, nil
}
