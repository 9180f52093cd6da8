package vk_test

import (
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/shaders"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

type fillPush struct {
	N     uint32
	Value float32
}

func fillPipeline(t *testing.T, d *vk.Device) *vk.Pipeline {
	t.Helper()
	code, err := shaders.SPIRV("fill_f32")
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.NewPipeline(vk.PipelineDesc{Name: "fill_f32", SPIRV: code, Bindings: 1, PushSize: 8, Spec: []uint32{64}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFill(t *testing.T) {
	for _, staging := range []bool{false, true} {
		name := "uma"
		if staging {
			name = "staging"
		}
		t.Run(name, func(t *testing.T) {
			d := vktest.Open(t, vk.Options{ForceStaging: staging})
			p := fillPipeline(t, d)
			const n = 1000
			buf, err := d.NewBuffer(4*(n+10), vk.DeviceBuffer)
			if err != nil {
				t.Fatal(err)
			}
			// UMA devices map device buffers directly (discrete GPUs may not).
			if staging && buf.Mapped() != nil {
				t.Error("Mapped() != nil with ForceStaging, want nil")
			}
			if !staging && d.Info().Type == vk.TypeCPU && os.Getenv("VKLLM_FORCE_STAGING") != "1" && buf.Mapped() == nil {
				t.Error("Mapped() == nil on a CPU device, want host-visible device memory used directly")
			}
			poison := make([]byte, 4*(n+10))
			for i := 0; i < n+10; i++ {
				binary.LittleEndian.PutUint32(poison[4*i:], 0x7fc00001)
			}
			if err := buf.Write(0, poison); err != nil {
				t.Fatal(err)
			}
			c, err := d.Begin()
			if err != nil {
				t.Fatal(err)
			}
			push := fillPush{N: n, Value: 2.5}
			c.Dispatch(p, [3]uint32{(n + 63) / 64, 1, 1}, vk.Bytes(&push), buf.Range(4*4, 4*(n+6)))
			if err := c.Submit(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4*(n+10))
			if err := buf.Read(0, got); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n+10; i++ {
				v := binary.LittleEndian.Uint32(got[4*i:])
				want := uint32(0x7fc00001)
				if i >= 4 && i < 4+n {
					want = math.Float32bits(2.5)
				}
				if v != want {
					t.Fatalf("element %d = %#x, want %#x", i, v, want)
				}
			}
		})
	}
}

func TestDispatchErrors(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	p := fillPipeline(t, d)
	buf, err := d.NewBuffer(1024, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	push := fillPush{N: 1}
	cases := []struct {
		name     string
		groups   [3]uint32
		push     []byte
		bindings []vk.Range
		want     string
	}{
		{"bindings", [3]uint32{1, 1, 1}, vk.Bytes(&push), nil, "0 bindings, want 1"},
		{"push", [3]uint32{1, 1, 1}, []byte{1, 2, 3, 4}, []vk.Range{buf.All()}, "4 push-constant bytes, want 8"},
		{"outside", [3]uint32{1, 1, 1}, vk.Bytes(&push), []vk.Range{buf.Range(512, 1024)}, "outside buffer"},
		{"empty", [3]uint32{1, 1, 1}, vk.Bytes(&push), []vk.Range{buf.Range(0, 0)}, "want 1.."},
		{"groups", [3]uint32{0, 1, 1}, vk.Bytes(&push), []vk.Range{buf.All()}, "workgroup count"},
		{"align", [3]uint32{1, 1, 1}, vk.Bytes(&push), []vk.Range{buf.Range(2, 8)}, "minStorageBufferOffsetAlignment"},
	}
	if d.Limits().MinStorageOffsetAlign == 1 {
		cases = cases[:len(cases)-1]
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := d.Begin()
			if err != nil {
				t.Fatal(err)
			}
			c.Dispatch(p, tc.groups, tc.push, tc.bindings...)
			err = c.Submit()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Submit() = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

// TestUniformBinding runs a kernel that reads one binding as a uniform
// buffer (matvec_f32_f32_xu: y = W x with x in a uniform buffer) and checks
// the uniform bindings' own limits.
// checkF32 fails t unless b starts with exactly the f32 values want.
func checkF32(t *testing.T, b *vk.Buffer, want []float32) {
	t.Helper()
	got := make([]byte, 4*len(want))
	if err := b.Read(0, got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); g != want[i] {
			t.Errorf("y[%d] = %v, want %v", i, g, want[i])
		}
	}
}

func TestUniformBinding(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	code, err := shaders.SPIRV("matvec_f32_f32_xu")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewPipeline(vk.PipelineDesc{Name: "bad", SPIRV: code, Bindings: 3, Uniform: 1 << 3, PushSize: 36}); err == nil || !strings.Contains(err.Error(), "uniform mask") {
		t.Errorf("NewPipeline(Uniform past the bindings) = %v, want an error naming the uniform mask", err)
	}
	// WG 8, one column, vector loads, one invocation and one row per row.
	p, err := d.NewPipeline(vk.PipelineDesc{Name: "matvec_f32_f32_xu", SPIRV: code, Bindings: 3, Uniform: 1 << 1, PushSize: 36, Spec: []uint32{8, 1, 1, 1, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	const rows, cols = 5, 8
	w := make([]float32, rows*cols)
	x := make([]float32, cols)
	want := make([]float32, rows)
	for r := range rows {
		for k := range cols {
			w[r*cols+k] = float32(r + 1)
			if r == 0 {
				x[k] = float32(k)
			}
			want[r] += float32(r+1) * float32(k)
		}
	}
	f32 := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		return b
	}
	wb, xb, yb := newBuf(t, d, 4*len(w)), newBuf(t, d, 1<<17), newBuf(t, d, 4*rows)
	if err := wb.Write(0, f32(w)); err != nil {
		t.Fatal(err)
	}
	if err := xb.Write(256, f32(x)); err != nil {
		t.Fatal(err)
	}
	// K, M, N, w_off, w_stride, x_off, x_stride, y_off, y_stride
	push := [9]uint32{cols, rows, 1, 0, 4 * cols, 0, cols, 0, rows}
	run := func(xr vk.Range) error {
		c, err := d.Begin()
		if err != nil {
			return err
		}
		c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), wb.All(), xr, yb.All())
		return c.Submit()
	}
	if err := run(xb.Range(256, 4*cols)); err != nil {
		t.Fatal(err)
	}
	checkF32(t, yb, want)
	lim := d.Limits()
	if lim.MaxUniformBufferRange < 1<<17 {
		if err := run(xb.Range(0, lim.MaxUniformBufferRange+16)); err == nil || !strings.Contains(err.Error(), "maxUniformBufferRange") {
			t.Errorf("a uniform binding of %d bytes: %v, want an error naming maxUniformBufferRange", lim.MaxUniformBufferRange+16, err)
		}
	}
	if lim.MinUniformOffsetAlign > 4 {
		if err := run(xb.Range(4, 4*cols)); err == nil || !strings.Contains(err.Error(), "minUniformBufferOffsetAlignment") {
			t.Errorf("a uniform binding at offset 4: %v, want an error naming minUniformBufferOffsetAlignment", err)
		}
	}
}

func newBuf(t *testing.T, d *vk.Device, size int) *vk.Buffer {
	t.Helper()
	b, err := d.NewBuffer(uint64(size), vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBufferTooLarge(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	_, err := d.NewBuffer(d.Limits().MaxAllocation+4, vk.DeviceBuffer)
	if !errors.Is(err, vk.ErrOutOfMemory) {
		t.Errorf("NewBuffer(MaxAllocation+4) = %v, want ErrOutOfMemory", err)
	}
}

func TestSelect(t *testing.T) {
	devs := []vk.DeviceInfo{
		{Index: 0, Name: "llvmpipe (LLVM 15)", Type: vk.TypeCPU},
		{Index: 1, Name: "AMD Radeon 780M", Type: vk.TypeIntegrated},
		{Index: 2, Name: "NVIDIA GeForce RTX 4090", Type: vk.TypeDiscrete},
		{Index: 3, Name: "AMD Radeon RX 7900", Type: vk.TypeDiscrete},
	}
	cases := []struct {
		sel     string
		want    int
		wantErr string
	}{
		{"", 2, ""},
		{"0", 0, ""},
		{"3", 3, ""},
		{"nvidia", 2, ""},
		{"LLVMPIPE", 0, ""},
		{"780m", 1, ""},
		{"radeon", -1, "more than one"},
		{"intel", -1, "no device matches"},
		{"7", -1, "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.sel, func(t *testing.T) {
			got, err := vk.Select(devs, tc.sel)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "NVIDIA GeForce RTX 4090") {
					t.Errorf("Select(%q) = %d, %v, want error containing %q and the device list", tc.sel, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Select(%q) = %d, %v, want %d", tc.sel, got, err, tc.want)
			}
		})
	}
	if _, err := vk.Select(devs[:1:1][:0], ""); err == nil {
		t.Error("Select(no devices) succeeded, want an error")
	}
	order := []vk.DeviceInfo{{Index: 0, Type: vk.TypeCPU}, {Index: 1, Type: vk.TypeVirtual}, {Index: 2, Type: vk.TypeIntegrated}}
	if got, _ := vk.Select(order, ""); got != 2 {
		t.Errorf("Select(cpu, virtual, integrated) = %d, want 2", got)
	}
}

func TestEstimateComputeUnits(t *testing.T) {
	cases := []struct {
		name        string
		d           vk.DeviceInfo
		want        int
		wantGuessed bool
	}{
		{"nvidia-sms", vk.DeviceInfo{Type: vk.TypeDiscrete, ComputeUnits: 132}, 132, false},
		{"amd-igpu-cus", vk.DeviceInfo{Type: vk.TypeIntegrated, ComputeUnits: 12}, 12, false},
		{"discrete", vk.DeviceInfo{Type: vk.TypeDiscrete}, 16, true},
		{"integrated", vk.DeviceInfo{Type: vk.TypeIntegrated}, 8, true},
		{"virtual", vk.DeviceInfo{Type: vk.TypeVirtual}, 8, true},
		{"cpu", vk.DeviceInfo{Type: vk.TypeCPU}, runtime.NumCPU(), true},
		{"other", vk.DeviceInfo{Type: vk.TypeOther}, 4, true},
	}
	for _, tc := range cases {
		if n, guessed := tc.d.EstimateComputeUnits(); n != tc.want || guessed != tc.wantGuessed {
			t.Errorf("%s: EstimateComputeUnits() = %d, %v, want %d, %v", tc.name, n, guessed, tc.want, tc.wantGuessed)
		}
	}
	// What this machine's driver reports: lavapipe exposes neither
	// extension, so a CPU device must come back guessed.
	d := vktest.Open(t, vk.Options{})
	info := d.Info()
	n, guessed := info.EstimateComputeUnits()
	t.Logf("%s: %d compute units reported, estimate %d (guessed %v)", info.Name, info.ComputeUnits, n, guessed)
	if n <= 0 || guessed != (info.ComputeUnits == 0) {
		t.Errorf("%s: EstimateComputeUnits() = %d, %v with %d reported", info.Name, n, guessed, info.ComputeUnits)
	}
}

// TestValidationReports proves the messenger works: a pipeline whose layout
// lacks the shader's binding is a validation error, and it must be seen.
func TestValidationReports(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	if !d.Validating() {
		t.Skip("validation layer not installed")
	}
	code, err := shaders.SPIRV("fill_f32")
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.NewPipeline(vk.PipelineDesc{Name: "fill_f32", SPIRV: code, Bindings: 0, PushSize: 8})
	if err == nil {
		p.Close()
	}
	if msgs := d.ValidationMessages(); len(msgs) == 0 {
		t.Error("NewPipeline with a missing binding: no validation message, want one")
	}
}

func TestRangeWindows(t *testing.T) {
	var b vk.Buffer
	cases := []struct {
		r      vk.Range
		window uint64
		want   []vk.Range
	}{
		{vk.Range{Buf: &b, Offset: 16, Size: 100}, 0, []vk.Range{{Buf: &b, Offset: 16, Size: 100}}},
		{vk.Range{Buf: &b, Offset: 16, Size: 100}, 100, []vk.Range{{Buf: &b, Offset: 16, Size: 100}}},
		{vk.Range{Buf: &b, Offset: 16, Size: 100}, 64, []vk.Range{{Buf: &b, Offset: 16, Size: 64}, {Buf: &b, Offset: 80, Size: 36}}},
		{vk.Range{Buf: &b, Offset: 0, Size: 256}, 128, []vk.Range{{Buf: &b, Offset: 0, Size: 128}, {Buf: &b, Offset: 128, Size: 128}}},
	}
	for _, tc := range cases {
		got := tc.r.Windows(tc.window)
		if len(got) != len(tc.want) {
			t.Errorf("Windows(%+v, %d) = %+v, want %+v", tc.r, tc.window, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("Windows(%+v, %d)[%d] = %+v, want %+v", tc.r, tc.window, i, got[i], tc.want[i])
			}
		}
	}
}

// TestDescriptorReuse checks that dispatches over the same ranges reuse one
// descriptor set, and that closing a buffer recycles its sets so a new
// buffer in its place works without validation errors.
func TestDescriptorReuse(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	p := fillPipeline(t, d)
	push := fillPush{N: 16, Value: 1}
	dispatch := func(r vk.Range) {
		t.Helper()
		c, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), r)
		c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), r)
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	a, err := d.NewBuffer(64, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	dispatch(a.All())
	dispatch(a.All())
	if n := p.CachedSets(); n != 1 {
		t.Errorf("CachedSets() after 4 dispatches over one range = %d, want 1", n)
	}
	a.Close()
	b, err := d.NewBuffer(64, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	dispatch(b.All())
	if n := p.CachedSets(); n != 1 {
		t.Errorf("CachedSets() after closing a and using b = %d, want 1 (recycled)", n)
	}
	got := make([]byte, 64)
	if err := b.Read(0, got); err != nil {
		t.Fatal(err)
	}
	if v := math.Float32frombits(binary.LittleEndian.Uint32(got[60:])); v != 1 {
		t.Errorf("b[15] = %g, want 1", v)
	}
}

// TestChainedDispatches checks the automatic barrier: each fill reads
// nothing, but a copy after it must see its result, in one graph.
func TestChainedDispatches(t *testing.T) {
	d := vktest.Open(t, vk.Options{ForceStaging: true})
	p := fillPipeline(t, d)
	src, err := d.NewBuffer(4096, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.NewBuffer(4096, vk.HostBuffer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		push := fillPush{N: 1024, Value: float32(i)}
		c.Dispatch(p, [3]uint32{16, 1, 1}, vk.Bytes(&push), src.All())
	}
	c.Copy(dst.All(), src.All())
	c.Fill(src.Range(0, 16), 0)
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
	m := dst.Mapped()
	for i := 0; i < 1024; i++ {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(m[4*i:])); v != 3 {
			t.Fatalf("dst[%d] = %g, want 3 (the last fill before the copy)", i, v)
		}
	}
}

func TestErrorIs(t *testing.T) {
	cases := []struct {
		res  int32
		lost bool
		oom  bool
	}{{-4, true, false}, {-2, false, true}, {-1, false, true}, {-3, false, false}}
	for _, tc := range cases {
		err := error(&vk.Error{Call: "vkQueueSubmit", Result: tc.res})
		if got := errors.Is(err, vk.ErrDeviceLost); got != tc.lost {
			t.Errorf("errors.Is(%v, ErrDeviceLost) = %v, want %v", err, got, tc.lost)
		}
		if got := errors.Is(err, vk.ErrOutOfMemory); got != tc.oom {
			t.Errorf("errors.Is(%v, ErrOutOfMemory) = %v, want %v", err, got, tc.oom)
		}
		if !strings.Contains(err.Error(), "vkQueueSubmit") {
			t.Errorf("Error() = %q, want it to name the call", err)
		}
	}
}

// TestStagedLarge moves more than StagingChunk bytes through the staging
// path, which must split the transfer.
func TestStagedLarge(t *testing.T) {
	d := vktest.Open(t, vk.Options{ForceStaging: true})
	n := vk.StagingChunk + 4096 + 12
	b, err := d.NewBuffer(uint64(n)+16, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	if err := b.Write(16, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := b.Read(16, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != data[i] {
			t.Fatalf("Read after Write: byte %d = %d, want %d", i, got[i], data[i])
		}
	}
}

// TestDescriptorCacheBounded dispatches over more distinct ranges than the
// cache keeps, then over as many new ones: the sets are recycled at Begin
// (not grown to twice as many) and results stay right.
func TestDescriptorCacheBounded(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	p := fillPipeline(t, d)
	const n = 1100 // distinct ranges, over maxCachedSets (1024)
	buf, err := d.NewBuffer(2*16*n, vk.HostBuffer)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		c, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			push := fillPush{N: 4, Value: float32(i + round)}
			c.NoBarrier() // disjoint ranges
			c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), buf.Range(16*uint64(i+round*n), 16))
		}
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
		m := buf.Mapped()
		for i := 0; i < n; i++ {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(m[16*(i+round*n):])); v != float32(i+round) {
				t.Fatalf("round %d: range %d = %g, want %d", round, i, v, i+round)
			}
		}
	}
	if got := p.CachedSets(); got != n {
		t.Errorf("CachedSets() = %d, want %d (recycled, not grown)", got, n)
	}
}

// TestProfile times every command of two graphs with timestamp queries:
// each pipeline's calls are counted, and the device times add up to no
// more than the wall time of the submits (timestamps come from the
// device's clock, in order); the graph's results are unchanged.
func TestProfile(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	if err := d.Profile(); err != nil {
		t.Fatal(err)
	}
	p := fillPipeline(t, d)
	src, err := d.NewBuffer(1<<20, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.NewBuffer(1<<20, vk.HostBuffer)
	if err != nil {
		t.Fatal(err)
	}
	var wall time.Duration
	for range 2 {
		c, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			push := fillPush{N: 1 << 18, Value: float32(i)}
			c.Dispatch(p, [3]uint32{1 << 12, 1, 1}, vk.Bytes(&push), src.All())
		}
		c.Copy(dst.All(), src.All())
		c.Fill(src.Range(0, 16), 0)
		t0 := time.Now()
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
		wall += time.Since(t0)
	}
	if v := math.Float32frombits(binary.LittleEndian.Uint32(dst.Mapped()[4*1000:])); v != 3 {
		t.Fatalf("dst[1000] = %g, want 3", v)
	}
	got, graphs := d.Profiled()
	if graphs != 2 {
		t.Errorf("%d graphs profiled, want 2", graphs)
	}
	calls := map[string]int{}
	var sum time.Duration
	for _, k := range got {
		calls[k.Name] = k.Calls
		sum += k.Time
		if k.Time < 0 {
			t.Errorf("%s: negative time %v", k.Name, k.Time)
		}
	}
	if want := map[string]int{"fill_f32": 6, "copy": 2, "fill": 2}; !maps.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
	if sum <= 0 || sum > wall {
		t.Errorf("profiled %v in all, want more than 0 and at most the %v the submits took", sum, wall)
	}
	t.Logf("%+v over %v", got, wall)
	if err := d.Profile(); err != nil { // restarts the sums
		t.Fatal(err)
	}
	if got, graphs := d.Profiled(); len(got) != 0 || graphs != 0 {
		t.Errorf("after a restart: %v, %d graphs; want none", got, graphs)
	}
}

// TestProfileLabels sums labelled dispatches apart from the same
// pipeline's unlabelled ones.
func TestProfileLabels(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	if err := d.Profile(); err != nil {
		t.Fatal(err)
	}
	p := fillPipeline(t, d)
	buf, err := d.NewBuffer(1<<16, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if !c.Profiling() {
		t.Error("Cmd.Profiling() = false after Device.Profile")
	}
	push := fillPush{N: 1 << 14, Value: 1}
	for _, label := range []string{"", "attn_q", "attn_q", "output", ""} {
		c.Label(label)
		c.Dispatch(p, [3]uint32{1 << 8, 1, 1}, vk.Bytes(&push), buf.All())
	}
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
	got, _ := d.Profiled()
	calls := map[string]int{}
	for _, k := range got {
		calls[k.Name+"/"+k.Label] = k.Calls
	}
	if want := map[string]int{"fill_f32/": 2, "fill_f32/attn_q": 2, "fill_f32/output": 1}; !maps.Equal(calls, want) {
		t.Errorf("calls by pipeline/label %v, want %v", calls, want)
	}
}

// TestCopyBandwidth times a copy between device buffers: a positive rate
// over the buffer's bytes, and the buffers freed afterwards.
func TestCopyBandwidth(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	r, err := d.CopyBandwidth(8<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 8<<20 || r.Reps != 3 || r.Best <= 0 || r.BytesPerSecond() <= 0 {
		t.Fatalf("CopyBandwidth(8 MiB, 3) = %+v (%g B/s), want 8 MiB, 3 reps, a positive time", r, r.BytesPerSecond())
	}
	t.Logf("%s: %.2f GB/s (read + written) over %d MiB", d.Info().Name, r.BytesPerSecond()/1e9, r.Bytes>>20)
	for _, h := range d.HeapUse() {
		if h.Device+h.Fallback+h.Host != 0 {
			t.Errorf("after CopyBandwidth heap %d holds %+v, want nothing", h.Heap, h)
		}
	}
	if _, err := d.CopyBandwidth(0, 1); err == nil {
		t.Error("CopyBandwidth(0 bytes) succeeded")
	}
}

// TestDeviceLocalBudget caps the device-local memory of a UMA device
// (lavapipe stands in for an APU with a small carve-out): device buffers
// past the cap fall back to host-visible memory and work the same; the
// capacity still counts that memory. Through the staging path (the
// discrete-GPU one) there is no fallback: the buffer past the cap is
// refused.
func TestDeviceLocalBudget(t *testing.T) {
	const mib = 1 << 20
	s := vktest.Open(t, vk.Options{DeviceLocalBudget: 4 * mib, ForceStaging: true})
	if _, err := s.NewBuffer(3*mib, vk.DeviceBuffer); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewBuffer(3*mib, vk.DeviceBuffer); !errors.Is(err, vk.ErrOutOfMemory) || !strings.Contains(err.Error(), "device-local budget") {
		t.Errorf("a second 3 MiB buffer past a 4 MiB budget, staging = %v, want ErrOutOfMemory naming the device-local budget", err)
	}
	if c := s.Capacity(); c != 4*mib {
		t.Errorf("Capacity() = %d with staging and a 4 MiB budget, want 4 MiB", c)
	}

	d := vktest.Open(t, vk.Options{DeviceLocalBudget: 4 * mib})
	if d.Discrete() { // a discrete GPU, or staging forced (VKLLM_FORCE_STAGING=1)
		t.Skipf("%s is discrete or staging: device buffers do not fall back", d.Info().Name)
	}
	var bufs []*vk.Buffer
	for i, wantFallback := range []bool{false, true, false} {
		b, err := d.NewBuffer([]uint64{3 * mib, 3 * mib, mib / 2}[i], vk.DeviceBuffer)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		if _, fb := b.Placement(); fb != wantFallback {
			t.Errorf("buffer %d: fallback %v, want %v", i, fb, wantFallback)
		}
	}
	// The fallback buffer works as any other: fill, copy, read back.
	c, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	c.Fill(bufs[1].All(), 0x01020304)
	c.Copy(bufs[0].All(), bufs[1].All())
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if err := bufs[0].Read(3*mib-8, got); err != nil || binary.LittleEndian.Uint32(got[4:]) != 0x01020304 {
		t.Errorf("copied from the fallback buffer: % x, %v; want 04 03 02 01 repeated", got, err)
	}
	var local, fallback uint64
	for _, h := range d.HeapUse() {
		local += h.Device
		fallback += h.Fallback
	}
	if local < 3*mib+mib/2 || local > 4*mib || fallback < 3*mib {
		t.Errorf("HeapUse: %d bytes device-local, %d fallback; want 3.5..4 MiB and at least 3 MiB", local, fallback)
	}
	if c := d.Capacity(); c < 8*mib {
		t.Errorf("Capacity() = %d with a 4 MiB device-local budget on %s; want the host-visible memory counted", c, d.Info().Name)
	}

}

// TestTexelBinding runs the matvec variant that reads its weights through
// a uniform texel buffer (binding 0) and its activations from a uniform
// buffer (binding 1), and checks the texel bindings' rules.
func TestTexelBinding(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	code, err := shaders.SPIRV("matvec_f32_f32_xt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewPipeline(vk.PipelineDesc{Name: "bad", SPIRV: code, Bindings: 3, Uniform: 1 << 1, Texel: 1<<1 | 1, PushSize: 36}); err == nil || !strings.Contains(err.Error(), "texel mask") {
		t.Errorf("NewPipeline(Texel overlapping Uniform) = %v, want an error naming the texel mask", err)
	}
	p, err := d.NewPipeline(vk.PipelineDesc{Name: "matvec_f32_f32_xt", SPIRV: code, Bindings: 3, Uniform: 1 << 1, Texel: 1, PushSize: 36, Spec: []uint32{8, 1, 1, 1, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	const rows, cols = 5, 8
	w := make([]byte, 4*rows*cols+64)
	x := make([]byte, 4*cols)
	want := make([]float32, rows)
	for k := range cols {
		binary.LittleEndian.PutUint32(x[4*k:], math.Float32bits(float32(k)))
	}
	for r := range rows {
		for k := range cols {
			binary.LittleEndian.PutUint32(w[64+4*(r*cols+k):], math.Float32bits(float32(r+1)))
			want[r] += float32(r+1) * float32(k)
		}
	}
	wb, xb, yb := newBuf(t, d, len(w)), newBuf(t, d, 256), newBuf(t, d, 4*rows)
	if err := wb.Write(0, w); err != nil {
		t.Fatal(err)
	}
	if err := xb.Write(0, x); err != nil {
		t.Fatal(err)
	}
	// K, M, N, w_off, w_stride, x_off, x_stride, y_off, y_stride
	push := [9]uint32{cols, rows, 1, 0, 4 * cols, 0, cols, 0, rows}
	run := func(wr vk.Range) error {
		c, err := d.Begin()
		if err != nil {
			return err
		}
		c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), wr, xb.Range(0, 4*cols), yb.All())
		return c.Submit()
	}
	// The weights start 64 bytes into the buffer: a view at an offset.
	if err := run(wb.Range(64, 4*rows*cols)); err != nil {
		t.Fatal(err)
	}
	checkF32(t, yb, want)
	if err := run(wb.Range(64, 4*rows*cols-2)); err == nil || !strings.Contains(err.Error(), "multiple of 4") {
		t.Errorf("a texel binding of %d bytes: %v, want an error asking for a multiple of 4", 4*rows*cols-2, err)
	}
	lim := d.Limits()
	if lim.MinTexelOffsetAlign > 4 {
		if err := run(wb.Range(4, 4*rows*cols)); err == nil || !strings.Contains(err.Error(), "minTexelBufferOffsetAlignment") {
			t.Errorf("a texel binding at offset 4: %v, want an error naming minTexelBufferOffsetAlignment", err)
		}
	}
}

// TestCopyRegions copies scattered regions, more than one vkCmdCopyBuffer
// takes, from a host buffer into a device buffer and back, with no
// allocation per recording, and refuses a region outside a buffer.
func TestCopyRegions(t *testing.T) {
	for _, staging := range []bool{false, true} {
		t.Run(map[bool]string{false: "uma", true: "staging"}[staging], func(t *testing.T) {
			d := vktest.Open(t, vk.Options{ForceStaging: staging})
			forced := staging || os.Getenv("VKLLM_FORCE_STAGING") == "1" // vktest.Open forces it then
			if got := d.Discrete(); got != (forced || d.Info().Type == vk.TypeDiscrete) {
				t.Errorf("Discrete() = %v with ForceStaging %v on a %v device", got, forced, d.Info().Type)
			}
			const n = 300 // regions of 12 bytes, every other 16-byte slot
			host, err := d.NewBuffer(16*2*n, vk.HostBuffer)
			if err != nil {
				t.Fatal(err)
			}
			dev, err := d.NewBuffer(16*2*n, vk.DeviceBuffer)
			if err != nil {
				t.Fatal(err)
			}
			back, err := d.NewBuffer(16*2*n, vk.HostBuffer)
			if err != nil {
				t.Fatal(err)
			}
			src := host.Mapped()
			for i := range src {
				src[i] = byte(i*7 + 1)
			}
			in := make([]vk.CopyRegion, n)
			out := make([]vk.CopyRegion, n+1)
			for i := range n {
				// Reversed placement on the device: region i lands at slot 2(n-1-i).
				in[i] = vk.CopyRegion{SrcOffset: uint64(32 * i), DstOffset: uint64(32 * (n - 1 - i)), Size: 12}
				out[i] = vk.CopyRegion{SrcOffset: uint64(32 * (n - 1 - i)), DstOffset: uint64(32 * i), Size: 12}
			}
			out[n] = vk.CopyRegion{SrcOffset: 16, DstOffset: 16, Size: 0} // empty: skipped
			record := func() {
				c, err := d.Begin()
				if err != nil {
					t.Fatal(err)
				}
				c.CopyRegions(dev, host, in)
				c.CopyRegions(back, dev, out)
				if err := c.Submit(); err != nil {
					t.Fatal(err)
				}
			}
			got := back.Mapped()
			for i := range got {
				got[i] = 0xEE // poison: bytes outside the regions keep it
			}
			record()
			for i := range n {
				for j := range 32 {
					want := byte(0xEE)
					if j < 12 {
						want = src[32*i+j]
					}
					if got[32*i+j] != want {
						t.Fatalf("back[%d] = %d, want %d (region %d byte %d)", 32*i+j, got[32*i+j], want, i, j)
					}
				}
			}
			if a := testing.AllocsPerRun(5, record); a != 0 {
				t.Errorf("recording two copies of %d regions: %v allocations, want 0", n, a)
			}
			c, err := d.Begin()
			if err != nil {
				t.Fatal(err)
			}
			c.CopyRegions(dev, host, []vk.CopyRegion{{SrcOffset: 16 * 2 * n, Size: 4}})
			if err := c.Submit(); err == nil || !strings.Contains(err.Error(), "region 0") {
				t.Errorf("CopyRegions past the source's end: Submit() = %v, want an error naming region 0", err)
			}
		})
	}
}

// TestRequiredSubgroupSize creates subgroup_size pipelines that require
// each subgroup size the device allows (VK_EXT_subgroup_size_control), full
// subgroups where it has computeFullSubgroups, and checks that the
// invocations see that size and the matching subgroup count; sizes outside
// the device's range, and full subgroups that a workgroup size cannot
// hold, are errors at creation.
func TestRequiredSubgroupSize(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	info := d.Info()
	code, err := shaders.SPIRV("subgroup_size")
	if err != nil {
		t.Fatal(err)
	}
	const wg = 64
	desc := func(size uint32, full bool, wg uint32) vk.PipelineDesc {
		return vk.PipelineDesc{Name: "subgroup_size", SPIRV: code, Bindings: 1, Spec: []uint32{wg}, SubgroupSize: size, FullSubgroups: full}
	}
	if !info.Features.SubgroupSizeControl {
		if _, err := d.NewPipeline(desc(info.SubgroupSize, false, wg)); err == nil || !strings.Contains(err.Error(), "no subgroup size control") {
			t.Errorf("NewPipeline(SubgroupSize %d) on %s without subgroup size control = %v, want an error", info.SubgroupSize, info.Name, err)
		}
		if info.MinSubgroupSize != info.SubgroupSize || info.MaxSubgroupSize != info.SubgroupSize {
			t.Errorf("subgroup size range [%d, %d] without subgroup size control, want the subgroup size %d", info.MinSubgroupSize, info.MaxSubgroupSize, info.SubgroupSize)
		}
		return
	}
	t.Logf("%s: subgroup sizes %d..%d, full subgroups %v", info.Name, info.MinSubgroupSize, info.MaxSubgroupSize, info.Features.FullSubgroups)
	if info.MinSubgroupSize == 0 || info.MinSubgroupSize > info.MaxSubgroupSize {
		t.Fatalf("subgroup size range [%d, %d], want 0 < min <= max", info.MinSubgroupSize, info.MaxSubgroupSize)
	}
	buf := newBuf(t, d, 8*wg*2)
	for size := info.MinSubgroupSize; size <= info.MaxSubgroupSize && size <= wg; size *= 2 {
		for _, full := range []bool{false, true} {
			if full && !info.Features.FullSubgroups {
				continue
			}
			p, err := d.NewPipeline(desc(size, full, wg))
			if err != nil {
				t.Fatalf("NewPipeline(SubgroupSize %d, full %v): %v", size, full, err)
			}
			c, err := d.Begin()
			if err != nil {
				t.Fatal(err)
			}
			c.Dispatch(p, [3]uint32{2, 1, 1}, nil, buf.All())
			if err := c.Submit(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 8*wg*2)
			if err := buf.Read(0, got); err != nil {
				t.Fatal(err)
			}
			for i := range 2 * wg {
				s, n := binary.LittleEndian.Uint32(got[8*i:]), binary.LittleEndian.Uint32(got[8*i+4:])
				if s != size || n != wg/size {
					t.Fatalf("SubgroupSize %d, full %v: invocation %d sees gl_SubgroupSize %d, gl_NumSubgroups %d, want %d and %d", size, full, i, s, n, size, wg/size)
				}
			}
			p.Close()
		}
	}
	for _, tc := range []struct {
		name string
		desc vk.PipelineDesc
		want string
	}{
		{"too small", desc(info.MinSubgroupSize/2, false, wg), "want a power of two"},
		{"too large", desc(2*info.MaxSubgroupSize, false, wg), "want a power of two"},
		{"not a power of two", desc(3*info.MinSubgroupSize, false, wg), "want a power of two"},
		{"partial workgroup", desc(info.MaxSubgroupSize, true, info.MaxSubgroupSize+info.MaxSubgroupSize/2+1), "multiple of the subgroup size"},
	} {
		if tc.name == "partial workgroup" && !info.Features.FullSubgroups {
			continue
		}
		if tc.desc.SubgroupSize == 0 {
			continue // min 1: no size below it
		}
		if _, err := d.NewPipeline(tc.desc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPipeline(%s: SubgroupSize %d, full %v, WG %d) = %v, want an error containing %q", tc.name, tc.desc.SubgroupSize, tc.desc.FullSubgroups, tc.desc.Spec[0], err, tc.want)
		}
	}
}

// TestSharedPipelines checks that pipelines of equal descriptions share one
// compiled pipeline, keep their own descriptor sets, and outlive each
// other's Close; one no pipeline uses stays compiled for the next of its
// description, up to the device's bound, past which the longest idle goes
// (the validation layer reports a pipeline destroyed while in use, or used
// after it).
func TestSharedPipelines(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	vk.SetIdleCap(d, 2)
	code, err := shaders.SPIRV("fill_f32")
	if err != nil {
		t.Fatal(err)
	}
	newFill := func(wg uint32) *vk.Pipeline {
		p, err := d.NewPipeline(vk.PipelineDesc{Name: "fill_f32", SPIRV: code, Bindings: 1, PushSize: 8, Spec: []uint32{wg}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	const n = 300
	bufs := make([]*vk.Buffer, 3)
	for i := range bufs {
		if bufs[i], err = d.NewBuffer(4*n, vk.DeviceBuffer); err != nil {
			t.Fatal(err)
		}
	}
	// fill runs each pipeline over its own buffer with its own value in one
	// submit and checks every buffer.
	fill := func(ps []*vk.Pipeline, wgs []uint32, base float32) {
		t.Helper()
		c, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range ps {
			push := fillPush{N: n, Value: base + float32(i)}
			c.Dispatch(p, [3]uint32{(n + wgs[i] - 1) / wgs[i], 1, 1}, vk.Bytes(&push), bufs[i].Range(0, 4*n))
		}
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4*n)
		for i := range ps {
			if err := bufs[i].Read(0, got); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < n; j++ {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*j:])); v != base+float32(i) {
					t.Fatalf("pipeline %d, element %d = %v, want %v", i, j, v, base+float32(i))
				}
			}
		}
	}
	compiled := func(when string, all, idle int) {
		t.Helper()
		if a, i := d.CompiledPipelines(); a != all || i != idle {
			t.Fatalf("%s: %d compiled, %d idle; want %d, %d", when, a, i, all, idle)
		}
	}
	compiled("new device", 0, 0)
	a, b, c := newFill(64), newFill(64), newFill(32)
	compiled("three pipelines, two of one description", 2, 0)
	fill([]*vk.Pipeline{a, b, c}, []uint32{64, 64, 32}, 1.5)
	a.Close()
	a.Close() // again: nothing
	compiled("one of the pair closed", 2, 0)
	fill([]*vk.Pipeline{b, c}, []uint32{64, 32}, 7)
	b.Close()
	compiled("the pair closed", 2, 1)
	a = newFill(64) // the idle one again
	compiled("the pair's description again", 2, 0)
	fill([]*vk.Pipeline{a, c}, []uint32{64, 32}, -3)
	a.Close()
	c.Close()
	compiled("all closed", 2, 2)
	e := newFill(16)
	compiled("a third description", 3, 2)
	e.Close() // three idle, past the bound: the longest idle (64) goes
	compiled("the third closed", 2, 2)
	a = newFill(64) // compiled again
	compiled("the evicted description again", 3, 2)
	fill([]*vk.Pipeline{a}, []uint32{64}, 11)
	a.Close()
}

// TestPrecompile checks that Precompile compiles each description once
// (on several threads, under the validation layer's thread checks) and
// that NewPipeline then takes the compiled pipelines, and that a bad
// description is refused before anything is compiled.
func TestPrecompile(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	code, err := shaders.SPIRV("fill_f32")
	if err != nil {
		t.Fatal(err)
	}
	desc := func(wg uint32) vk.PipelineDesc {
		return vk.PipelineDesc{Name: "fill_f32", SPIRV: code, Bindings: 1, PushSize: 8, Spec: []uint32{wg}}
	}
	compiled := func(when string, all, idle int) {
		t.Helper()
		if a, i := d.CompiledPipelines(); a != all || i != idle {
			t.Fatalf("%s: %d compiled, %d idle; want %d, %d", when, a, i, all, idle)
		}
	}
	bad := desc(64)
	bad.SPIRV = bad.SPIRV[:len(bad.SPIRV)-2]
	if err := d.Precompile([]vk.PipelineDesc{desc(64), bad}); err == nil || !strings.Contains(err.Error(), "not SPIR-V") {
		t.Fatalf("Precompile with a truncated module = %v, want an error saying it is not SPIR-V", err)
	}
	compiled("a refused batch", 0, 0)
	wgs := []uint32{64, 32, 64, 16, 128, 32, 8}
	descs := make([]vk.PipelineDesc, len(wgs))
	for i, wg := range wgs {
		descs[i] = desc(wg)
	}
	if err := d.Precompile(descs); err != nil {
		t.Fatal(err)
	}
	compiled("seven descriptions, five different", 5, 5)
	if err := d.Precompile(descs[:2]); err != nil {
		t.Fatal(err)
	}
	compiled("the same again", 5, 5)
	const n = 200
	buf, err := d.NewBuffer(4*n, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	for i, wg := range wgs {
		p, err := d.NewPipeline(desc(wg))
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		push := fillPush{N: n, Value: float32(i)}
		c.Dispatch(p, [3]uint32{(n + wg - 1) / wg, 1, 1}, vk.Bytes(&push), buf.Range(0, 4*n))
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4*n)
		if err := buf.Read(0, got); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < n; j++ {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*j:])); v != float32(i) {
				t.Fatalf("workgroup %d: element %d = %v, want %v", wg, j, v, float32(i))
			}
		}
		defer p.Close()
	}
	compiled("all in use", 5, 0)
}

// TestFirstDispatches: a compiled pipeline's first recorded dispatch
// counts once, whatever Pipeline of its description records it and however
// often; another specialization is another pipeline. OnFirstDispatch's
// hook hears of each first dispatch once, by name, until it is removed.
func TestFirstDispatches(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	buf, err := d.NewBuffer(4*64, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	code, err := shaders.SPIRV("fill_f32")
	if err != nil {
		t.Fatal(err)
	}
	push := fillPush{N: 64, Value: 1}
	dispatch := func(p *vk.Pipeline) {
		t.Helper()
		c, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), buf.All())
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := fillPipeline(t, d), fillPipeline(t, d) // the same description: one compiled pipeline
	other, err := d.NewPipeline(vk.PipelineDesc{Name: "fill_f32", SPIRV: code, Bindings: 1, PushSize: 8, Spec: []uint32{32}})
	if err != nil {
		t.Fatal(err)
	}
	var heard []string
	d.OnFirstDispatch(func(name string) { heard = append(heard, name) })
	for _, step := range []struct {
		p    *vk.Pipeline
		want int64
	}{{a, 1}, {a, 1}, {b, 1}, {other, 2}, {other, 2}} {
		dispatch(step.p)
		if got := d.FirstDispatches(); got != step.want {
			t.Fatalf("FirstDispatches() = %d, want %d", got, step.want)
		}
	}
	if want := []string{"fill_f32", "fill_f32"}; !slices.Equal(heard, want) {
		t.Errorf("OnFirstDispatch heard %q, want %q", heard, want)
	}
	d.OnFirstDispatch(nil)
	third, err := d.NewPipeline(vk.PipelineDesc{Name: "fill_f32", SPIRV: code, Bindings: 1, PushSize: 8, Spec: []uint32{16}})
	if err != nil {
		t.Fatal(err)
	}
	dispatch(third)
	if d.FirstDispatches() != 3 || len(heard) != 2 {
		t.Errorf("after removing the hook: FirstDispatches() = %d (want 3), hook heard %d names (want 2)", d.FirstDispatches(), len(heard))
	}
}
