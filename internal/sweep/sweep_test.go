package sweep

import "testing"

// TestPick checks the short sweep's rotation and the long one's
// everything.
func TestPick(t *testing.T) {
	t.Setenv("VKLLM_LONG", "")
	const n = 5
	seen := make([]int, n)
	for i := range 23 {
		picked := 0
		for j := range n {
			if Pick(i, j, n) {
				picked++
				seen[j]++
			}
		}
		if picked != 1 {
			t.Errorf("short sweep: item %d runs with %d of %d, want 1", i, picked, n)
		}
	}
	for j, c := range seen {
		if c < 4 || c > 5 {
			t.Errorf("short sweep: item %d of %d ran %d times over 23, want 4 or 5", j, n, c)
		}
	}
	if !Pick(-3, 2, n) || Pick(-3, 1, n) {
		t.Error("short sweep: negative items must rotate as the positive ones")
	}
	t.Setenv("VKLLM_LONG", "1")
	if !Long() {
		t.Fatal("Long() = false with VKLLM_LONG=1")
	}
	for i := range 7 {
		for j := range n {
			if !Pick(i, j, n) {
				t.Errorf("long sweep: Pick(%d, %d) = false", i, j)
			}
		}
	}
}
