package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// TestSelfCheck runs the self-check on the test device: every path the
// device claims runs and matches the CPU reference, and the paths it does
// not claim are not run.
func TestSelfCheck(t *testing.T) {
	dev := vktest.Open(t, vk.Options{})
	f := dev.Features()
	claims := map[string]bool{"subgroup-arith": f.SubgroupArithmetic, "subgroup-size": f.SubgroupSizeControl,
		"int-dot": f.IntegerDot, "fp16-storage": f.Storage16}
	checks := SelfCheck(dev)
	if len(checks) != len(selfCheckPaths) {
		t.Fatalf("SelfCheck() = %d results, want %d", len(checks), len(selfCheckPaths))
	}
	for _, c := range checks {
		if want, ok := claims[c.Path]; ok && c.Claimed != want {
			t.Errorf("SelfCheck() %s claimed = %v, want %v (the device's feature)", c.Path, c.Claimed, want)
		}
		if c.Err != nil {
			t.Errorf("SelfCheck() %s: %v, want a pass", c.Path, c.Err)
		}
		t.Logf("%s: claimed %v, passed %v", c.Path, c.Claimed, c.Passed())
	}
	if dev.Features() != f {
		t.Errorf("SelfCheck changed the device's features: %+v, want %+v", dev.Features(), f)
	}
}

// TestSelfCheckDisablesBroken loads a model with one path's self-check
// broken on purpose: the path is reported failed and turned off, the
// others stay on, and the model's logits still match the CPU reference
// (Config.Verify fails a forward pass otherwise).
func TestSelfCheckDisablesBroken(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t, "models"), "llama-spm-256x4-q8_0.gguf")
	for _, tc := range []struct {
		path   string
		has    func(vk.Features) bool
		kernel func(m *Model) bool // the kernels' path is on
	}{
		{"subgroup-arith", func(f vk.Features) bool { return f.SubgroupArithmetic }, func(m *Model) bool { return m.GPU.k.Subgroups() }},
		{"int-dot", func(f vk.Features) bool { return f.IntegerDot }, func(m *Model) bool { return m.GPU.k.IntegerDot() }},
	} {
		t.Run(tc.path, func(t *testing.T) {
			m, err := Load(path, Config{CtxSize: 64, BatchSize: 32, Verify: true, SelfCheck: true, selfCheckBroken: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if len(m.Checks) == 0 {
				t.Fatal("Load with SelfCheck left Model.Checks empty")
			}
			for _, c := range m.Checks {
				if c.Path == tc.path {
					if !c.Claimed {
						t.Skipf("%s does not claim %s", m.Device().Info().Name, tc.path)
					}
					if c.Err == nil {
						t.Errorf("the broken %s passed the self-check", tc.path)
					}
				} else if c.Err != nil {
					t.Errorf("%s failed the self-check: %v", c.Path, c.Err)
				}
			}
			if tc.has(m.Device().Features()) || tc.kernel(m) {
				t.Errorf("after the %s self-check failed, the feature is %v and the kernels' path %v, want both off", tc.path, tc.has(m.Device().Features()), tc.kernel(m))
			}
			prompt := testPrompt(m, 1, 21)
			if _, err := m.Prefill(context.Background(), 0, 0, prompt); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if _, err := m.Step(0, m.Blocks.Len(0), int32(7+i)); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
		})
	}
}
