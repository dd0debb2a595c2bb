package ops

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestCheckVolumeNamesTheVoxel: the error names the first bad voxel by
// its (i, j, k).
func TestCheckVolumeNamesTheVoxel(t *testing.T) {
	n := [3]int{7, 5, 3}
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(i) - 50
	}
	if err := checkVolume(v, n); err != nil {
		t.Fatal(err)
	}
	v[(4*n[1]+2)*n[2]+1] = float32(math.Inf(-1))
	v[(6*n[1]+0)*n[2]+2] = float32(math.NaN())
	err := checkVolume(v, n)
	if !errors.Is(err, ErrWavelet) || !strings.Contains(err.Error(), "voxel (4, 2, 1) is -Inf") {
		t.Fatalf("got %v", err)
	}
}
