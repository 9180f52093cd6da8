// Command spvkhr writes the SPV_KHR_cooperative_matrix twin of SPIR-V
// modules written against SPV_NV_cooperative_matrix (see package
// shaders/spvkhr): for each argument NAME_nv.spv it writes NAME_khr.spv
// beside it. shaders/compile.sh runs it on the *_nv variants.
//
// Usage:
//
//	go run ./tools/spvkhr shaders/spv/matmul_coop_q4_0_f32_nv.spv ...
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/vkllm/vkllm/shaders/spvkhr"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: spvkhr NAME_nv.spv ...")
		os.Exit(2)
	}
	for _, in := range os.Args[1:] {
		if err := convert(in); err != nil {
			fmt.Fprintln(os.Stderr, "spvkhr:", err)
			os.Exit(1)
		}
	}
}

// convert writes the KHR twin of the module in file in (named *_nv.spv).
func convert(in string) error {
	if !strings.HasSuffix(in, "_nv.spv") {
		return fmt.Errorf("%s: want a file named *_nv.spv", in)
	}
	nv, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	khr, err := spvkhr.NVToKHR(nv)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	out := strings.TrimSuffix(in, "_nv.spv") + "_khr.spv"
	if err := os.WriteFile(out+".tmp", khr, 0o644); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}
