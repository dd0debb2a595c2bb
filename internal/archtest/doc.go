// Package archtest holds no code: its test checks the directions of the
// module's imports (see layers_test.go).
package archtest
