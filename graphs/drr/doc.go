// Package drr renders digitally reconstructed radiographs: X-ray line
// integrals through a volume, cast from a point source to every pixel of
// a flat detector, pose after pose.
//
// A Config holds the options a user sets for the computation (the
// volume's spacing and origin, its units or the user's attenuation
// formula, the method); the CLI fills it from its flags, the C ABI from
// its JSON and the Python package from its keywords. Config.Prepare makes
// a Setup of a volume from it, and New the Job that package engine runs:
// poses (batch, 12) → DRR → images (batch, rows, cols) → ImageStats, one
// replay per batch of poses.
//
// The Job knows no files: it hands each pose's image to the Setup's Image
// and Out hooks and each batch to a Saver, and takes back a resumed run's
// poses with Restore. Package graphs keeps the files around it (volumes,
// geometry files, drr.npy and PNGs, shards, checkpoints). Compile makes the
// in-process object, a Program: one volume and detector, compiled once,
// rendering the poses of each call.
package drr
