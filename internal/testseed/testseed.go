// Package testseed gives randomized tests their seed: a fixed one by
// default, so that every run (CI's included) draws the same inputs and a
// failure reproduces, or $VKLLM_SEED to explore others ("random" picks one
// from the clock). The seed is logged with the line that reruns it.
package testseed

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Fixed is the seed of a run without $VKLLM_SEED.
const Fixed uint64 = 20240917

// Seed returns the seed for t: $VKLLM_SEED when set (a decimal number, or
// "random" for one from the clock), else Fixed. A malformed $VKLLM_SEED
// fails t.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := Fixed
	switch s := os.Getenv("VKLLM_SEED"); s {
	case "":
	case "random":
		seed = uint64(time.Now().UnixNano())
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("VKLLM_SEED=%q: want a decimal seed or \"random\"", s)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with VKLLM_SEED=%d)", seed, seed)
	return seed
}

// Rand returns a generator seeded with Seed(t); stream tells apart the
// generators of one test.
func Rand(t testing.TB, stream uint64) *rand.Rand {
	t.Helper()
	seed := Seed(t)
	return rand.New(rand.NewPCG(seed, seed^stream^0x9e3779b97f4a7c15))
}
