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
// barrier before a dispatch counts towards it). Dispatches recorded under
// a label (Cmd.Label) are summed apart from the pipeline's others.
type KernelTime struct {
	Name  string
	Label string
	Calls int
	Time  time.Duration
}

// kernelKey names one sum of a profile.
type kernelKey struct{ name, label string }

// profiler holds the timestamp query pool of a profiling Device.
type profiler struct {
	pool    gv.QueryPool
	period  float64 // nanoseconds per timestamp tick
	mask    uint64  // valid timestamp bits
	names   []kernelKey
	results []uint64
	totals  map[kernelKey]*KernelTime
	graphs  int
}

// Profile starts timing every dispatch on the device with timestamp
// queries (a dispatch is then serialized with its neighbours, as barriers
// already do between dependent ones); Profiled returns the sums. It fails
// when the queue cannot write timestamps. Profiling costs a little per
// dispatch: use it for measurements, not in serving.
func (d *Device) Profile() error {
	if d.prof != nil {
		d.prof.totals, d.prof.graphs = map[kernelKey]*KernelTime{}, 0
		return nil
	}
	if d.cmd.recording {
		return fmt.Errorf("vk: Profile: a graph is being recorded")
	}
	period, mask, err := d.timestamps("Profile")
	if err != nil {
		return err
	}
	p := &profiler{period: period, mask: mask, totals: map[kernelKey]*KernelTime{},
		results: make([]uint64, maxProfileQueries)}
	if p.pool, err = d.queryPool(maxProfileQueries); err != nil {
		return err
	}
	d.prof = p
	return nil
}

// timestamps returns the nanoseconds per timestamp tick of the compute
// queue and the mask of its valid bits, or an error naming where when the
// queue writes none.
func (d *Device) timestamps(where string) (period float64, mask uint64, err error) {
	bits := d.queueFamilies()[d.family].timestampBits
	var props gv.PhysicalDeviceProperties
	gv.GetPhysicalDeviceProperties(d.phys, &props)
	props.Deref()
	props.Limits.Deref()
	if bits == 0 || props.Limits.TimestampPeriod <= 0 {
		return 0, 0, fmt.Errorf("vk: %s: device %s cannot write timestamps on its compute queue", where, d.info.Name)
	}
	mask = ^uint64(0)
	if bits < 64 {
		mask = 1<<bits - 1
	}
	return float64(props.Limits.TimestampPeriod), mask, nil
}

// queryPool creates a pool of n timestamp queries.
func (d *Device) queryPool(n uint32) (gv.QueryPool, error) {
	info := gv.QueryPoolCreateInfo{SType: gv.StructureTypeQueryPoolCreateInfo, QueryType: gv.QueryTypeTimestamp, QueryCount: n}
	var pool gv.QueryPool // a local: cgo refuses a pointer into a struct holding Go pointers
	if err := check("vkCreateQueryPool", gv.CreateQueryPool(d.dev, &info, nil, &pool)); err != nil {
		return nil, err
	}
	return pool, nil
}

// Profiling reports whether the device times every command (Profile).
func (d *Device) Profiling() bool { return d.prof != nil }

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
		if c := compareStrings(a.Name, b.Name); c != 0 {
			return c
		}
		return compareStrings(a.Label, b.Label)
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

// after writes the timestamp that ends the dispatch of pipeline name
// (recorded under label).
func (p *profiler) after(cb gv.CommandBuffer, name, label string) {
	if len(p.names)+1 >= maxProfileQueries {
		return
	}
	p.names = append(p.names, kernelKey{name, label})
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
	for i, key := range p.names {
		k := p.totals[key]
		if k == nil {
			k = &KernelTime{Name: key.name, Label: key.label}
			p.totals[key] = k
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

// CopyRate is the result of Device.CopyBandwidth.
type CopyRate struct {
	Bytes uint64        // size of the buffer copied
	Reps  int           // copies timed
	Best  time.Duration // the fastest copy's device time
}

// BytesPerSecond is the memory traffic of the fastest copy: the bytes read
// plus the bytes written, per second (the convention of memory-bandwidth
// figures: a copy at the memory's bandwidth moves it both ways).
func (r CopyRate) BytesPerSecond() float64 {
	if r.Best <= 0 {
		return 0
	}
	return 2 * float64(r.Bytes) / r.Best.Seconds()
}

// CopyBandwidth measures the device's memory bandwidth: it copies one
// DeviceBuffer of size bytes into another reps times, one graph each,
// timed by timestamps around the copy, and keeps the fastest. The two
// buffers are freed before it returns; sizes that do not fit are errors
// matching ErrOutOfMemory (try a smaller one). Call it between graphs.
func (d *Device) CopyBandwidth(size uint64, reps int) (CopyRate, error) {
	if size == 0 || reps < 1 {
		return CopyRate{}, fmt.Errorf("vk: CopyBandwidth(%d bytes, %d reps): want both positive", size, reps)
	}
	period, mask, err := d.timestamps("CopyBandwidth")
	if err != nil {
		return CopyRate{}, err
	}
	src, err := d.NewBuffer(size, DeviceBuffer)
	if err != nil {
		return CopyRate{}, err
	}
	defer src.Close()
	dst, err := d.NewBuffer(size, DeviceBuffer)
	if err != nil {
		return CopyRate{}, err
	}
	defer dst.Close()
	pool, err := d.queryPool(2)
	if err != nil {
		return CopyRate{}, err
	}
	defer gv.DestroyQueryPool(d.dev, pool, nil)
	c, err := d.Begin()
	if err != nil {
		return CopyRate{}, err
	}
	c.Fill(src.All(), 0x3c003c00) // not zeros: a driver could skip them
	c.Fill(dst.All(), 0)
	if err := c.Submit(); err != nil {
		return CopyRate{}, err
	}
	r := CopyRate{Bytes: src.size, Reps: reps}
	ts := make([]uint64, 2)
	for range reps {
		c, err := d.Begin()
		if err != nil {
			return r, err
		}
		gv.CmdResetQueryPool(c.cb, pool, 0, 2)
		gv.CmdWriteTimestamp(c.cb, gv.PipelineStageTopOfPipeBit, pool, 0)
		c.Copy(dst.All(), src.All())
		if c.err == nil {
			gv.CmdWriteTimestamp(c.cb, gv.PipelineStageBottomOfPipeBit, pool, 1)
		}
		if err := c.Submit(); err != nil {
			return r, err
		}
		flags := gv.QueryResultFlags(gv.QueryResult64Bit | gv.QueryResultWaitBit)
		if err := check("vkGetQueryPoolResults", gv.GetQueryPoolResults(d.dev, pool, 0, 2, 16, unsafe.Pointer(&ts[0]), 8, flags)); err != nil {
			return r, err
		}
		dt := time.Duration(float64((ts[1]-ts[0])&mask) * period)
		if r.Best == 0 || dt < r.Best {
			r.Best = dt
		}
	}
	return r, nil
}
