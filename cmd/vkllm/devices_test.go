package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/vk"
)

func TestWriteDevices(t *testing.T) {
	devs := []vk.DeviceInfo{
		{Index: 0, Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Type: vk.TypeCPU, TypeName: "cpu", DriverName: "llvmpipe", APIVersion: "1.3.230",
			SubgroupSize: 8, Heaps: []vk.Heap{{Size: 2 << 30, DeviceLocal: true}}, Features: vk.Features{Storage16: true, SubgroupArithmetic: true},
			Limits: vk.Limits{MaxStorageBufferRange: 128 << 20}},
		{Index: 1, Name: "Radeon RX 7900", Type: vk.TypeDiscrete, TypeName: "discrete", DriverName: "radv", APIVersion: "1.3.278",
			SubgroupSize: 64, MinSubgroupSize: 32, MaxSubgroupSize: 64, ComputeUnits: 96, Heaps: []vk.Heap{{Size: 24 << 30, DeviceLocal: true}, {Size: 32 << 30}},
			Features:      vk.Features{CoopMatrix: true, SubgroupSizeControl: true},
			CoopMatrixExt: "VK_KHR_cooperative_matrix", CoopMatrixShapes: []vk.CoopMatrixShape{
				{M: 16, N: 16, K: 16, A: vk.ComponentFloat16, B: vk.ComponentFloat16, C: vk.ComponentFloat32, Result: vk.ComponentFloat32, Scope: vk.ScopeSubgroup},
				{M: 16, N: 16, K: 16, A: vk.ComponentSint8, B: vk.ComponentSint8, C: vk.ComponentSint32, Result: vk.ComponentSint32, Saturating: true, Scope: vk.ScopeSubgroup},
			}},
	}
	var b bytes.Buffer
	if err := writeDevices(&b, devs, 1, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("writeDevices table = %d lines, want 4:\n%s", len(lines), b.String())
	}
	if want := "device 1 cooperative matrices (VK_KHR_cooperative_matrix): 16x16x16 f16*f16+f32->f32 subgroup, 16x16x16 s8*s8+s32->s32 subgroup saturating"; lines[3] != want {
		t.Errorf("writeDevices shapes line = %q, want %q", lines[3], want)
	}
	for _, want := range []string{"llvmpipe", "cpu", "2.0 GiB local", "128 MiB", "fp16-storage,subgroup-arith"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("writeDevices row 0 = %q, want it to contain %q", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], "64 (32-64)") || !strings.Contains(lines[2], "subgroup-size") {
		t.Errorf("writeDevices row 1 = %q, want its subgroup sizes 64 (32-64) and subgroup-size among the features", lines[2])
	}
	if !strings.Contains(lines[2], "  96  ") {
		t.Errorf("writeDevices row 1 = %q, want its 96 compute units", lines[2])
	}
	if !strings.Contains(lines[1], "  ~") {
		t.Errorf("writeDevices row 0 = %q, want a guessed (~) count of compute units", lines[1])
	}
	if !strings.HasPrefix(lines[2], "*") || strings.HasPrefix(lines[1], "*") {
		t.Errorf("writeDevices marks %q / %q, want only device 1 marked", lines[1], lines[2])
	}
	b.Reset()
	if err := writeDevices(&b, devs, 0, true); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Index    int    `json:"index"`
		Type     string `json:"type"`
		Selected bool   `json:"selected"`
		Shapes   []struct {
			M, N, K uint32
			A       string `json:"a"`
			Result  string `json:"result"`
			Scope   string `json:"scope"`
		} `json:"coop_matrix_shapes"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("writeDevices JSON: %v\n%s", err, b.String())
	}
	if len(got) != 2 || !got[0].Selected || got[1].Selected || got[1].Type != "discrete" {
		t.Errorf("writeDevices JSON = %+v, want 2 devices, the first selected, the second discrete", got)
	}
	if len(got) == 2 && (len(got[0].Shapes) != 0 || len(got[1].Shapes) != 2 || got[1].Shapes[0].K != 16 ||
		got[1].Shapes[0].A != "f16" || got[1].Shapes[0].Result != "f32" || got[1].Shapes[0].Scope != "subgroup") {
		t.Errorf("writeDevices JSON shapes = %+v / %+v, want none, then 16x16x16 f16 -> f32 subgroup first", got[0].Shapes, got[1].Shapes)
	}
}

func TestWriteChecks(t *testing.T) {
	info := vk.DeviceInfo{Index: 1, Name: "Radeon RX 7900"}
	checks := []engine.PathCheck{
		{Path: "subgroup-arith", Claimed: true},
		{Path: "int-dot", Claimed: true, Disabled: true, Err: errors.New("differs from the CPU reference by 0.5")},
		{Path: "coopmat"},
		{Path: "fp16-storage", Claimed: true, Err: errors.New("differs")},
	}
	var b bytes.Buffer
	if err := writeChecks(&b, info, checks, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{"self-check of device 1 (Radeon RX 7900):", "subgroup-arith  pass",
		"int-dot         FAIL: differs from the CPU reference by 0.5 (serve turns this path off)",
		"coopmat         not claimed", "fp16-storage    FAIL: differs (no fallback)"}
	if len(lines) != len(want) {
		t.Fatalf("writeChecks = %d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i := range want {
		if strings.TrimSpace(lines[i]) != want[i] {
			t.Errorf("writeChecks line %d = %q, want %q", i, strings.TrimSpace(lines[i]), want[i])
		}
	}
	b.Reset()
	if err := writeChecks(&b, info, checks, true); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Path            string
		Claimed, Passed bool
		Error           string
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("writeChecks JSON: %v\n%s", err, b.String())
	}
	if len(got) != 4 || !got[0].Passed || got[1].Passed || got[1].Error == "" || got[2].Claimed || got[2].Passed {
		t.Errorf("writeChecks JSON = %+v, want subgroup-arith passed, int-dot failed with its error, coopmat not claimed", got)
	}
}
