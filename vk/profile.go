package vk

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// maxProfileQueries bounds the timestamps of one submitted graph (one per
// dispatch plus the start); dispatches past it are not timed.
const maxProfileQueries = 4096

// KernelTime is the device time spent in one pipeline over the graphs
// submitted since Profile started: the sum of the intervals between the
// timestamp written before each of its dispatches and the one after (the
// barrier before a dispatch counts towards it).
type KernelTime struct {
	Name  string
	Calls int
	Time  time.Duration
}

// profiler holds the timestamp query pool of a profiling Device.
type profiler struct {
	pool    gv.QueryPool
	period  float64 // nanoseconds per timestamp tick
	mask    uint64  // valid timestamp bits
	names   []string
	results []uint64
	totals  map[string]*KernelTime
	graphs  int
}

// Profile starts timing every dispatch on the device with timestamp
// queries (a dispatch is then serialized with its neighbours, as barriers
// already do between dependent ones); Profiled returns the sums. It fails
// when the queue cannot write timestamps. Profiling costs a little per
// dispatch: use it for measurements, not in serving.
func (d *Device) Profile() error {
	if d.prof != nil {
		d.prof.totals, d.prof.graphs = map[string]*KernelTime{}, 0
		return nil
	}
	if d.cmd.recording {
		return fmt.Errorf("vk: Profile: a graph is being recorded")
	}
	var nq uint32
	gv.GetPhysicalDeviceQueueFamilyProperties(d.phys, &nq, nil)
	fams := make([]gv.QueueFamilyProperties, nq)
	gv.GetPhysicalDeviceQueueFamilyProperties(d.phys, &nq, fams)
	fams[d.family].Deref()
	bits := fams[d.family].TimestampValidBits
	var props gv.PhysicalDeviceProperties
	gv.GetPhysicalDeviceProperties(d.phys, &props)
	props.Deref()
	props.Limits.Deref()
	if bits == 0 || props.Limits.TimestampPeriod <= 0 {
		return fmt.Errorf("vk: Profile: device %s cannot write timestamps on its compute queue", d.info.Name)
	}
	p := &profiler{period: float64(props.Limits.TimestampPeriod), mask: ^uint64(0), totals: map[string]*KernelTime{},
		results: make([]uint64, maxProfileQueries)}
	if bits < 64 {
		p.mask = 1<<bits - 1
	}
	info := gv.QueryPoolCreateInfo{SType: gv.StructureTypeQueryPoolCreateInfo, QueryType: gv.QueryTypeTimestamp, QueryCount: maxProfileQueries}
	var pool gv.QueryPool // a local: cgo refuses a pointer into p, which holds Go pointers
	if err := check("vkCreateQueryPool", gv.CreateQueryPool(d.dev, &info, nil, &pool)); err != nil {
		return err
	}
	p.pool = pool
	d.prof = p
	return nil
}

// Profiled returns the kernel times gathered since Profile, the most time
// first, and the number of graphs they came from.
func (d *Device) Profiled() ([]KernelTime, int) {
	if d.prof == nil {
		return nil, 0
	}
	var out []KernelTime
	for _, k := range d.prof.totals {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b KernelTime) int {
		if a.Time != b.Time {
			return int(b.Time - a.Time)
		}
		return compareStrings(a.Name, b.Name)
	})
	return out, d.prof.graphs
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// begin resets the pool and writes the start timestamp of a graph.
func (p *profiler) begin(cb gv.CommandBuffer) {
	p.names = p.names[:0]
	gv.CmdResetQueryPool(cb, p.pool, 0, maxProfileQueries)
	gv.CmdWriteTimestamp(cb, gv.PipelineStageBottomOfPipeBit, p.pool, 0)
}

// after writes the timestamp that ends the dispatch of pipeline name.
func (p *profiler) after(cb gv.CommandBuffer, name string) {
	if len(p.names)+1 >= maxProfileQueries {
		return
	}
	p.names = append(p.names, name)
	gv.CmdWriteTimestamp(cb, gv.PipelineStageBottomOfPipeBit, p.pool, uint32(len(p.names)))
}

// collect reads the timestamps of the graph that just finished.
func (p *profiler) collect(dev gv.Device) error {
	n := len(p.names) + 1
	if len(p.names) == 0 {
		return nil
	}
	flags := gv.QueryResultFlags(gv.QueryResult64Bit | gv.QueryResultWaitBit)
	if err := check("vkGetQueryPoolResults", gv.GetQueryPoolResults(dev, p.pool, 0, uint32(n), uint64(8*n), unsafe.Pointer(&p.results[0]), 8, flags)); err != nil {
		return err
	}
	for i, name := range p.names {
		k := p.totals[name]
		if k == nil {
			k = &KernelTime{Name: name}
			p.totals[name] = k
		}
		dt := (p.results[i+1] - p.results[i]) & p.mask
		k.Calls++
		k.Time += time.Duration(float64(dt) * p.period)
	}
	p.graphs++
	return nil
}

func (p *profiler) close(dev gv.Device) {
	gv.DestroyQueryPool(dev, p.pool, nil)
}
