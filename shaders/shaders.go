// Package shaders holds the GLSL compute kernels and their SPIR-V, compiled by
// glslc at build time (make shaders) into spv/ and embedded here.
//
// Each .comp file is one kernel family; its variants are listed in
// "// variant: NAME -D..." lines and each becomes the pipeline NAME
// (op_src_dst). The Go structs that mirror push-constant blocks live with the
// code that dispatches them.
package shaders

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed spv/*.spv
var spv embed.FS

// SPIRV returns the compiled code of the named pipeline variant.
func SPIRV(name string) ([]byte, error) {
	b, err := spv.ReadFile("spv/" + name + ".spv")
	if err != nil {
		return nil, fmt.Errorf("shaders: no compiled variant %q (run make shaders)", name)
	}
	return b, nil
}

// Names lists every compiled variant, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(spv, "spv")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".spv"))
	}
	sort.Strings(names)
	return names
}
