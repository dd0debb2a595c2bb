//go:build !cuda

package main

// cudaBuild is false in the default build: --device cuda says how to get
// the GPU flavour.
const cudaBuild = false
