// Package register finds the rigid pose of a CT volume from one or more
// X-ray images of it: intensity-based 2D/3D registration. It renders the
// volume's DRRs under a rigid transform with ops.RigidDRR, compares them
// with the targets through an image loss (ops.ImageLoss: normalised
// cross-correlation, gradient NCC or mean squared error), and minimises
// the loss over the transform's six parameters with L-BFGS, the gradient
// coming from Gorgonia's symbolic differentiation (G.Grad) of the graph
// parameters → images → loss.
//
// Each level of the coarse-to-fine pyramid (detector and volume averaged
// over blocks of 2^k) is one graph, forward and backward compiled once
// into a TapeMachine and replayed at every step over buffers allocated
// once, so a step's time and memory stay flat however long the run.
package register
