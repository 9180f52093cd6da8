package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/vk"
)

// cmdDevices lists the Vulkan devices: index, name, type, driver, API
// version, memory, compute units (a guess marked '~' where the driver does
// not report them), subgroup size and features, then the cooperative-matrix
// shapes of the devices that have them. The device that --device (or
// $VKLLM_DEVICE, or the default order) selects is marked with '*'. With
// --check it then runs the GPU self-check on that device (engine.SelfCheck)
// and prints each feature-gated path's result; a path that fails makes
// the command fail.
func cmdDevices(args []string) error {
	fs := newFlagSet("devices")
	sel := fs.StringLong("device", "", "device `index or name substring` to mark as selected (default $VKLLM_DEVICE, then discrete > integrated > virtual > CPU)")
	asJSON := fs.BoolLong("json", "print JSON instead of a table")
	check := fs.BoolLong("check", "also run each feature-gated kernel path the selected device claims (subgroup reductions, required subgroup size, integer dot, cooperative matrix, 16-bit storage) once against the CPU reference and print pass or fail")
	if err := parseFlags(fs, args, false, "vkllm devices [--device SEL] [--json] [--check]"); err != nil {
		return err
	}
	if len(fs.GetArgs()) > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.GetArgs())
	}
	devs, err := vk.Devices(vk.Options{})
	if err != nil {
		return err
	}
	s := *sel
	if s == "" {
		s = os.Getenv("VKLLM_DEVICE")
	}
	chosen, err := vk.Select(devs, s)
	if err != nil {
		return err
	}
	if err := writeDevices(os.Stdout, devs, chosen, *asJSON); err != nil || !*check {
		return err
	}
	dev, err := vk.Open(vk.Options{Device: strconv.Itoa(chosen)})
	if err != nil {
		return err
	}
	defer dev.Close()
	checks := engine.SelfCheck(dev)
	if err := writeChecks(os.Stdout, dev.Info(), checks, *asJSON); err != nil {
		return err
	}
	for _, c := range checks {
		if c.Err != nil {
			return fmt.Errorf("device %d: the %s path failed its self-check", chosen, c.Path)
		}
	}
	return nil
}

// writeChecks prints the self-check's results: one line per path, or JSON.
func writeChecks(w io.Writer, info vk.DeviceInfo, checks []engine.PathCheck, asJSON bool) error {
	if asJSON {
		type entry struct {
			Path    string `json:"path"`
			Claimed bool   `json:"claimed"`
			Passed  bool   `json:"passed"`
			Error   string `json:"error,omitempty"`
		}
		out := make([]entry, len(checks))
		for i, c := range checks {
			out[i] = entry{Path: c.Path, Claimed: c.Claimed, Passed: c.Passed()}
			if c.Err != nil {
				out[i].Error = c.Err.Error()
			}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "self-check of device %d (%s):\n", info.Index, info.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range checks {
		res := "pass"
		switch {
		case !c.Claimed:
			res = "not claimed"
		case c.Err != nil && c.Disabled:
			res = "FAIL: " + c.Err.Error() + " (serve turns this path off)"
		case c.Err != nil:
			res = "FAIL: " + c.Err.Error() + " (no fallback)"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", c.Path, res)
	}
	return tw.Flush()
}

// writeDevices prints devs as a table (or JSON), marking index chosen.
func writeDevices(w io.Writer, devs []vk.DeviceInfo, chosen int, asJSON bool) error {
	if asJSON {
		type entry struct {
			vk.DeviceInfo
			Selected bool `json:"selected"`
		}
		out := make([]entry, len(devs))
		for i, d := range devs {
			out[i] = entry{d, d.Index == chosen}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tINDEX\tNAME\tTYPE\tDRIVER\tAPI\tMEMORY\tUNITS\tSUBGROUP\tMAX BINDING\tFEATURES")
	for _, d := range devs {
		mark := ""
		if d.Index == chosen {
			mark = "*"
		}
		driver := d.DriverName
		if d.DriverInfo != "" {
			driver += " " + d.DriverInfo
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", mark, d.Index, d.Name, d.Type, driver, d.APIVersion,
			memory(d), computeUnits(d), subgroupSizes(d), gib(d.Limits.MaxStorageBufferRange), features(d.Features))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range devs {
		if len(d.CoopMatrixShapes) == 0 {
			continue
		}
		shapes := make([]string, len(d.CoopMatrixShapes))
		for i, s := range d.CoopMatrixShapes {
			shapes[i] = s.String()
		}
		if _, err := fmt.Fprintf(w, "device %d cooperative matrices (%s): %s\n", d.Index, d.CoopMatrixExt, strings.Join(shapes, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// computeUnits is the device's compute units as the driver reports them,
// or "~n", vk's guess, where it does not.
func computeUnits(d vk.DeviceInfo) string {
	n, guessed := d.EstimateComputeUnits()
	if guessed {
		return fmt.Sprintf("~%d", n)
	}
	return fmt.Sprint(n)
}

// subgroupSizes is the device's default subgroup size, followed by the
// range a pipeline may require where that is wider ("32 (32-64)").
func subgroupSizes(d vk.DeviceInfo) string {
	if d.Features.SubgroupSizeControl && d.MinSubgroupSize < d.MaxSubgroupSize {
		return fmt.Sprintf("%d (%d-%d)", d.SubgroupSize, d.MinSubgroupSize, d.MaxSubgroupSize)
	}
	return fmt.Sprint(d.SubgroupSize)
}

func memory(d vk.DeviceInfo) string {
	var parts []string
	for _, h := range d.Heaps {
		kind := "host"
		if h.DeviceLocal {
			kind = "local"
		}
		parts = append(parts, gib(h.Size)+" "+kind)
	}
	return strings.Join(parts, ", ")
}

func gib(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}

func features(f vk.Features) string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{
		{f.Storage16, "fp16-storage"}, {f.Float16, "fp16-math"}, {f.Storage8, "int8-storage"}, {f.IntegerDot, "int-dot"},
		{f.CoopMatrix, "coopmat"}, {f.BufferDeviceAddress, "bda"}, {f.SubgroupArithmetic, "subgroup-arith"},
		{f.PushDescriptor, "push-descriptor"}, {f.MemoryBudget, "memory-budget"}, {f.SubgroupSizeControl, "subgroup-size"},
	} {
		if x.on {
			out = append(out, x.name)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}
