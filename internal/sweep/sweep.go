// Package sweep tells tests how much of a cross product of cases to run:
// all of it under VKLLM_LONG=1 (make test-long), or a subset that still
// runs every case and every item of the other dimension (make test, CI).
// On lavapipe each new kernel specialization costs 0.1 to 30 s of LLVM
// compilation on a cold shader cache, so a test over formats x layouts x
// shapes compiles hundreds of them; most of that product checks the same
// code with other constants.
package sweep

import "os"

// Long reports whether the exhaustive sweeps run: VKLLM_LONG=1.
func Long() bool { return os.Getenv("VKLLM_LONG") == "1" }

// Pick reports whether item i of one dimension runs with item j of
// another of n items (0 <= j < n): every pair under Long; otherwise the
// pairs with i = j modulo n, so each i runs with one j and, over i, the
// j rotate.
func Pick(i, j, n int) bool {
	return Long() || ((i-j)%n+n)%n == 0
}
