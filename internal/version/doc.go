// Package version provides tapeloop's release version, read from the file
// VERSION beside this package: the one place it is written. The command
// prints it (tapeloop --version, tapeloop info), the C ABI reports it
// (tl_release, tapeloop.__version__ in Python) and the Python package's
// build (python/setup.py) gives it to the wheel.
package version
