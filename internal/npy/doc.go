// Package npy reads and writes NumPy .npy files, streaming.
//
// Readers accept format versions 1.0, 2.0 and 3.0, C or Fortran order
// (a Fortran-order array is delivered in C order), either byte order, and the numeric dtypes bool, int8…int64, uint8…uint64, float32 and
// float64, converting elements to float32 or float64 as they are read, a
// chunk at a time, so a file never has to fit in memory. Writers emit
// version 1.0 headers (2.0 when the header does not fit), padded so the data
// starts on a 64-byte boundary, in little-endian float32 or float64, and
// count what is written so that a short file is an error, not a surprise.
//
// gorgonia.org/tensor has a .npy reader, but it ignores the byte order and
// rejects most dtypes; this package exists to read what NumPy users have.
package npy
