package volume

import "math"

// ellipsoid is one ellipsoid of the phantom: intensity a, semi-axes, centre
// in [−1, 1]³ coordinates, and a rotation phi (degrees) about the z axis.
type ellipsoid struct{ a, ax, ay, az, x0, y0, z0, phi float64 }

// sheppLogan are the ten ellipsoids of the 3-D Shepp–Logan head phantom with
// the higher contrast of Toft's modified version (as in MATLAB's phantom3d):
// skull, brain, two ventricles, and smaller features.
var sheppLogan = []ellipsoid{
	{1, .6900, .920, .810, 0, 0, 0, 0},
	{-.8, .6624, .874, .780, 0, -.0184, 0, 0},
	{-.2, .1100, .310, .220, .22, 0, 0, -18},
	{-.2, .1600, .410, .280, -.22, 0, 0, 18},
	{.1, .2100, .250, .410, 0, .35, -.15, 0},
	{.1, .0460, .046, .050, 0, .1, .25, 0},
	{.1, .0460, .046, .050, 0, -.1, .25, 0},
	{.1, .0460, .023, .050, -.08, -.605, 0, 0},
	{.1, .0230, .023, .020, 0, -.606, 0, 0},
	{.1, .0230, .046, .020, .06, -.605, 0, 0},
}

// Phantom makes the 3-D Shepp–Logan phantom on an n³ grid spanning fov mm,
// its box centred at the world origin (voxel 0's centre at −fov/2 + s/2,
// s = fov/n), index axes along x, y and z, as linear attenuation per mm: intensity × muWater
// (the skull 1.0, the brain 0.2).
func Phantom(n int, fov, muWater float64) *Volume {
	s := fov / float64(n)
	v := &Volume{V: alloc(n * n * n), N: [3]int64{int64(n), int64(n), int64(n)},
		Origin: [3]float64{-fov/2 + s/2, -fov/2 + s/2, -fov/2 + s/2}, Spacing: [3]float64{s, s, s}}
	coord := func(i int) float64 { return (float64(i)+0.5)/float64(n)*2 - 1 }
	for _, e := range sheppLogan {
		c, sn := math.Cos(e.phi*math.Pi/180), math.Sin(e.phi*math.Pi/180)
		for i := range n {
			x := coord(i) - e.x0
			for j := range n {
				y := coord(j) - e.y0
				xr, yr := c*x+sn*y, -sn*x+c*y
				q := (xr*xr)/(e.ax*e.ax) + (yr*yr)/(e.ay*e.ay)
				if q > 1 {
					continue
				}
				row := v.V[(i*n+j)*n : (i*n+j+1)*n]
				for k := range n {
					z := coord(k) - e.z0
					if q+(z*z)/(e.az*e.az) <= 1 {
						row[k] += float32(e.a * muWater)
					}
				}
			}
		}
	}
	return v
}
