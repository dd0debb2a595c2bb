package volume

// Downsample returns v averaged over blocks of f×f×f voxels (f ≥ 1): the
// volume as a coarser scanner would see it, for coarse-to-fine work. Each
// axis keeps n/f blocks (a remainder of fewer than f slices at the far end
// is left out); a block's centre is the mean of its voxels' centres, so the
// new origin is the centre of the first block and the spacing f times the
// old. Downsample(v, 1) returns v.
func Downsample(v *Volume, f int) *Volume {
	if f <= 1 {
		return v
	}
	if v.Padded {
		panic("volume: Downsample of a padded volume")
	}
	n := [3]int64{v.N[0] / int64(f), v.N[1] / int64(f), v.N[2] / int64(f)}
	for a := range 3 {
		n[a] = max(n[a], 1)
	}
	h := float64(f-1) / 2
	d := &Volume{N: n, Direction: v.Direction, Origin: v.World([3]float64{h, h, h}), V: alloc(int(n[0] * n[1] * n[2]))}
	for a := range 3 {
		d.Spacing[a] = v.Spacing[a] * float64(f)
	}
	ny, nz := v.N[1], v.N[2]
	for i := range n[0] {
		for j := range n[1] {
			for k := range n[2] {
				var s float64
				var c int
				for ii := i * int64(f); ii < min((i+1)*int64(f), v.N[0]); ii++ {
					for jj := j * int64(f); jj < min((j+1)*int64(f), v.N[1]); jj++ {
						row := v.V[(ii*ny+jj)*nz:]
						for kk := k * int64(f); kk < min((k+1)*int64(f), v.N[2]); kk++ {
							s += float64(row[kk])
							c++
						}
					}
				}
				d.V[(i*n[1]+j)*n[2]+k] = float32(s / float64(c))
			}
		}
	}
	return d
}
