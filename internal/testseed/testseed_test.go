package testseed

import "testing"

// TestSeed checks the three sources of the seed.
func TestSeed(t *testing.T) {
	t.Setenv("VKLLM_SEED", "")
	if got := Seed(t); got != Fixed {
		t.Errorf("Seed without VKLLM_SEED = %d, want the fixed %d", got, Fixed)
	}
	t.Setenv("VKLLM_SEED", "1795457028925123616")
	if got := Seed(t); got != 1795457028925123616 {
		t.Errorf("Seed with VKLLM_SEED=1795457028925123616 = %d", got)
	}
	a, b := Rand(t, 1).Uint64(), Rand(t, 1).Uint64()
	if a != b {
		t.Errorf("two Rand(t, 1) with one seed draw %d and %d, want the same", a, b)
	}
	if c := Rand(t, 2).Uint64(); c == a {
		t.Errorf("Rand(t, 2) draws %d like Rand(t, 1), want another stream", c)
	}
}
