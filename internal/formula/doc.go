// Package formula is the language of the users' own functions: one
// expression in Go expression syntax, read by the standard library's
// go/parser, checked against the variables a workload offers, and
// compiled into a program for the vectorised evaluator of package cpukern
// (and, for GPUs, into CUDA C).
//
// A formula is made of numbers, the workload's variables, named
// parameters (given by value when the formula is compiled: they become
// constants), the operators + − * / ^ (power, binding tighter than * and
// unary minus, right-associative as in mathematics: -x^2 is −(x²)),
// comparisons < <= > >= == != (1 when true, 0 when false), && || !, and
// the functions of Functions. Some variables are vectors (the two images
// of an affinity, the M values of an interpolation): arithmetic on them is
// element by element, and the reductions sum, mean, max, min, dot and norm
// turn them into one number. max and min of two arguments are element by
// element; of one, they reduce.
//
// Errors name the formula, the column and the problem.
//
// Each operation is declared once, in the table of ops_table.go: its
// name, arguments and kind, its reference in Go (Apply), its code for the
// evaluator and for CUDA. The parser, the emitter of CUDA C and `go
// generate` (which writes the evaluator's instructions into package
// cpukern's formula_ops.h and formula_ops.go) all read it.
package formula
