package vk

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// gokiSafe lists the goki/vulkan functions, conversions and struct types vk
// may use. Each was read in goki/vulkan v1.0.8's generated code: it passes
// handles, scalars and Go memory straight through, or copies a struct
// whose C copy is never freed behind the call's back. Wrappers that take
// a slice (or a struct holding one: create infos with name lists, pool
// sizes, set layouts, descriptor writes, queue-family or layer properties)
// copy it into C memory that a finalizer frees, possibly while the driver
// is still reading or writing it; those calls go through glue.c instead
// (TestVulkanCallsUnderGC shows the corruption). Add a name here only after
// reading its wrapper.
var gokiSafe = []string{
	// functions
	"AllocateCommandBuffers", "AllocateMemory", "BindBufferMemory", "CmdBindDescriptorSets",
	"CmdBindPipeline", "CmdDispatch", "CmdFillBuffer", "CmdPushConstants", "CmdResetQueryPool",
	"CmdWriteTimestamp", "CreateBuffer", "CreateBufferView", "CreateCommandPool", "CreateFence",
	"CreateQueryPool", "DestroyBuffer", "DestroyBufferView", "DestroyCommandPool",
	"DestroyDescriptorPool", "DestroyDescriptorSetLayout", "DestroyDevice", "DestroyFence",
	"DestroyInstance", "DestroyPipeline", "DestroyPipelineLayout", "DestroyQueryPool",
	"DestroyShaderModule", "DeviceWaitIdle", "EndCommandBuffer", "EnumeratePhysicalDevices", "FreeMemory",
	"GetBufferMemoryRequirements", "GetDeviceQueue", "GetPhysicalDeviceMemoryProperties",
	"GetPhysicalDeviceProperties", "GetQueryPoolResults", "Init", "InitInstance", "MakeVersion",
	"MapMemory", "ResetCommandBuffer", "SetGetInstanceProcAddr", "ToString", "UnmapMemory",
	// conversions and struct types (none with a slice field set)
	"BufferCreateInfo", "BufferUsageFlags", "BufferView", "BufferViewCreateInfo",
	"CommandBufferAllocateInfo", "CommandPoolCreateFlags", "CommandPoolCreateInfo",
	"DescriptorPool", "DescriptorSet", "DescriptorSetLayout", "Device", "DeviceSize",
	"FenceCreateInfo", "Instance", "MemoryAllocateInfo", "MemoryHeapFlags",
	"MemoryPropertyFlags", "Pipeline", "PipelineLayout", "QueryPoolCreateInfo",
	"QueryResultFlags", "QueueFlags", "Result", "ShaderModule", "ShaderStageFlags",
}

// TestGokiCallsAreSafe fails when vk's code calls a goki/vulkan function or
// builds a goki struct that is not in gokiSafe.
func TestGokiCallsAreSafe(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	bad := map[string][]string{}
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		alias := ""
		for _, im := range f.Imports {
			if im.Path.Value == `"github.com/goki/vulkan"` {
				alias = "vulkan"
				if im.Name != nil {
					alias = im.Name.Name
				}
			}
		}
		if alias == "" {
			continue
		}
		check := func(e ast.Expr) {
			sel, ok := e.(*ast.SelectorExpr)
			if !ok {
				return
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == alias {
				seen++
				if !slices.Contains(gokiSafe, sel.Sel.Name) {
					bad[sel.Sel.Name] = append(bad[sel.Sel.Name], fset.Position(sel.Pos()).String())
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				check(n.Fun)
			case *ast.CompositeLit:
				check(n.Type)
			}
			return true
		})
	}
	if seen == 0 {
		t.Fatal("found no goki/vulkan use in vk's sources: is the test reading the right directory?")
	}
	var names []string
	for n := range bad {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("vulkan.%s is not in gokiSafe (used at %s): read its generated wrapper; if it copies a slice into finalizer-freed C memory, call Vulkan through glue.c instead", n, strings.Join(bad[n], ", "))
	}
}
