package quant

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fusedOp matches the fused multiply-add instructions of the architectures
// where the Go compiler fuses float32 x*y+z (arm64, riscv64: FMADDS and
// relatives; loong64: FMADDF and relatives; s390x: WFMASB/WFMSSB).
var fusedOp = regexp.MustCompile(`\s(FN?M(ADD|SUB)[SDF]?|WFN?M[AS][SD]B)\s`)

// TestNoFusedMultiplyAdd compiles the package for the architectures where
// Go fuses multiply-adds and fails if any fused instruction is emitted: a
// fused x*y-z rounds once where llama.cpp's x86 build rounds twice, which
// would break bit-exact dequantization there. It needs the go command and
// is skipped with -short.
func TestNoFusedMultiplyAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the package for other architectures; skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	for _, arch := range []string{"arm64", "s390x", "riscv64", "loong64"} {
		t.Run(arch, func(t *testing.T) {
			out := compileAssembly(t, gobin, arch)
			var fused []string
			fn := ""
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, " STEXT ") {
					fn = strings.Fields(line)[0]
				}
				if fusedOp.MatchString(line) {
					fused = append(fused, fn+": "+strings.TrimSpace(line))
				}
			}
			if len(fused) > 0 {
				t.Errorf("GOARCH=%s: %d fused multiply-add instructions, want 0:\n%s", arch, len(fused), strings.Join(fused, "\n"))
			}
		})
	}
}

// compileAssembly compiles the package's non-test files for GOARCH=arch
// with go tool compile -S (go build would print nothing for a cached
// package) and returns the assembly listing.
func compileAssembly(t *testing.T, gobin, arch string) []byte {
	t.Helper()
	env := append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	run := func(args ...string) []byte {
		cmd := exec.Command(gobin, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			msg := ""
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("go %s for %s: %v\n%s", strings.Join(args, " "), arch, err, msg)
		}
		return out
	}
	cfg := run("list", "-export", "-deps", "-f", "{{if .Export}}packagefile {{.ImportPath}}={{.Export}}{{end}}", ".")
	files := strings.Fields(string(run("list", "-f", "{{join .GoFiles \" \"}}", ".")))
	pkg := strings.TrimSpace(string(run("list", "-f", "{{.ImportPath}}", ".")))
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "importcfg")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"tool", "compile", "-S", "-p", pkg, "-importcfg", cfgPath, "-o", filepath.Join(dir, "quant.o")}, files...)
	return run(args...)
}
