// Package option holds what the four workloads' Configs share, and what
// makes one Config serve three front ends.
//
// Each workload's Config (packages interp, affinity, drr and wavelet)
// tags every field with the name its command-line flag has (flag:"dx")
// and the name its JSON key and Python keyword have (json:"dx"). The CLI
// maps its flags onto the fields, the C ABI decodes its JSON into the
// Config itself, and the Python package passes its keywords as that
// JSON; tests in each front end walk the fields with Fields and fail when
// one is missing.
//
// A field may also say what the command line shows of it: help (the
// flag's help), arg (the value's name in that help), default (when the
// Config's own default is not the one shown) and env (the environment
// variable that sets it); the CLI makes such a flag from the tags alone.
//
// A field that cannot change a run's results (it only makes a warning an
// error, say) is also tagged fingerprint:"-". Every other field must
// change the fingerprint that shards and checkpoints record of their
// run: a test of the file layer changes each such field in turn and
// fails when the fingerprint stays the same.
//
// Errors name an option the way the command line does (--dx, --param).
// Keywords rewrites those names for a caller who set them as keywords
// (dx=, params=), using the same tags.
package option
