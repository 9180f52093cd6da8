package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/peterbourgon/ff/v4"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/vk"
)

// modelFlags are the flags every command that loads a model shares.
type modelFlags struct {
	model      string
	device     string
	ctxSize    int
	batchSize  int
	kvMemory   string
	cacheTypeK string
	cacheTypeV string
	validation bool
	verify     bool
	cacheDir   string
	// checkpoints is --ctx-checkpoints: a hybrid model's recurrent-state
	// checkpoints.
	checkpoints int
	hubFlags
}

// register adds the model flags to fs. With env (serve), their defaults are
// plain and parseFlags reads every VKLLM_* variable; without, the model,
// device and validation defaults come from $VKLLM_MODEL, $VKLLM_DEVICE and
// $VKLLM_VALIDATION=1 as they always have.
func (m *modelFlags) register(fs *ff.FlagSet, defaultCtx int, env bool) {
	model, device, validation := "", "", false
	if !env {
		model, device, validation = os.Getenv("VKLLM_MODEL"), os.Getenv("VKLLM_DEVICE"), os.Getenv("VKLLM_VALIDATION") == "1"
	}
	fs.StringVar(&m.model, 'm', "model", model, "GGUF model `file`, or the name of a model in the store (owner/repo[:quant], see vkllm list)")
	m.hubFlags.register(fs)
	fs.StringVar(&m.device, 0, "device", device, "Vulkan device: `index or name substring` (default discrete > integrated > virtual > CPU; see vkllm devices)")
	fs.IntVar(&m.ctxSize, 'c', "ctx-size", defaultCtx, "most `positions` one sequence may use, prompt and output (0 = the model's training context, at most 4096)")
	fs.StringVar(&m.kvMemory, 0, "kv-memory", "", "KV-cache pool `size` shared by all sequences: bytes (2GiB, 512MB) or a fraction of the device memory left after the weights (0.5); default: all of it but a 5% safety margin on GPUs, --parallel x --ctx-size positions on CPU devices")
	fs.StringVar(&m.cacheTypeK, 0, "cache-type-k", "f16", "KV-cache `type` of keys: f16, q8_0 (half the memory) or q4_0 (a quarter, some accuracy lost)")
	fs.StringVar(&m.cacheTypeV, 0, "cache-type-v", "f16", "KV-cache `type` of values: f16, q8_0 or q4_0")
	fs.IntVar(&m.checkpoints, 0, "ctx-checkpoints", 8, "hybrid models (qwen35): recurrent-state `checkpoints` kept for the prefix cache, each one sequence's state (every 64 prompt positions a prompt's state is saved; later prompts with the same start resume from the longest); 0 turns them off")
	fs.IntVar(&m.batchSize, 0, "batch-size", 512, "most `tokens` per forward pass (prompts are processed in chunks of this)")
	fs.BoolVarDefault(&m.validation, 0, "validation", validation, "enable the Vulkan validation layer")
	fs.StringVar(&m.cacheDir, 0, "cache-dir", defaultCacheDir(), "`folder` of the compiled-kernel cache (a Vulkan pipeline cache file per device, loaded at start, saved after warm-up and at exit); \"\" or none turns it off")
	fs.BoolVarDefault(&m.verify, 0, "verify", false, "also run the CPU reference forward pass and fail when the GPU disagrees (slow; for debugging)")
}

// load loads the model with a progress display on stderr.
func (m *modelFlags) load(parallel int) (*engine.Model, error) {
	if _, err := m.resolve(context.Background(), newDownloadProgress(os.Stderr), nil, false); err != nil {
		return nil, err
	}
	if m.model == "" {
		return nil, fmt.Errorf("no model: pass -m file.gguf, -m owner/repo[:quant] (a stored model) or -hf owner/repo[:quant]")
	}
	kvBytes, kvFrac, err := parseKVMemory(m.kvMemory)
	if err != nil {
		return nil, err
	}
	typeK, typeV, err := m.cacheTypes()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	bar := newProgress(os.Stderr, "loading "+m.model)
	model, err := engine.Load(m.model, engine.Config{
		Device: m.device, CtxSize: m.ctxSize, Parallel: parallel, BatchSize: m.batchSize,
		KVMemory: kvBytes, KVFraction: kvFrac, CacheTypeK: typeK, CacheTypeV: typeV,
		Validation: m.validation, Verify: m.verify, Progress: bar.update, PipelineCacheDir: m.pipelineCacheDir(),
		Checkpoints: checkpointCount(m.checkpoints),
	})
	bar.done()
	if err != nil {
		return nil, err
	}
	info := model.Device().Info()
	fmt.Fprintf(os.Stderr, "loaded %s (%s, %d layers, %d embd, vocab %d) on %s in %.2fs\n",
		m.model, model.Opts.Arch, model.Opts.Layers, model.Opts.Embd, model.Opts.Vocab, info.Name, time.Since(start).Seconds())
	// Which heap holds what: on integrated GPUs device buffers past the
	// device-local budget fall back to host-visible memory.
	for _, h := range model.GPU.Placement() {
		fmt.Fprintf(os.Stderr, "memory: %v\n", h)
	}
	if s := cacheStatus(model.Device().PipelineCache()); s != "" {
		fmt.Fprintf(os.Stderr, "kernels: %s\n", s)
	}
	return model, nil
}

// defaultCacheDir is --cache-dir's default: vkllm in the user's cache
// folder ($XDG_CACHE_HOME or ~/.cache on Linux), none where there is no
// such folder (no $HOME).
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "vkllm")
}

// pipelineCacheDir is the folder --cache-dir names, "" for none.
func (m *modelFlags) pipelineCacheDir() string {
	if m.cacheDir == "none" {
		return ""
	}
	return m.cacheDir
}

// cacheStatus says what the device's pipeline cache loaded, for the
// console ("" without one).
func cacheStatus(pc vk.PipelineCacheInfo) string {
	switch {
	case pc.Path == "":
		return ""
	case pc.Ignored != "":
		return fmt.Sprintf("pipeline cache %s ignored: %s", pc.Path, pc.Ignored)
	case pc.LoadedBytes > 0:
		return fmt.Sprintf("pipeline cache %s: %s loaded", pc.Path, humanize.IBytes(uint64(pc.LoadedBytes)))
	}
	return fmt.Sprintf("pipeline cache %s: empty", pc.Path)
}

// saveCache saves model's pipeline cache (--cache-dir), saying on w what
// it wrote or why it could not.
func saveCache(w io.Writer, model *engine.Model) {
	dev := model.Device()
	before := dev.PipelineCache().SavedBytes
	if err := dev.SavePipelineCache(); err != nil {
		fmt.Fprintf(w, "warning: %v\n", err)
	} else if pc := dev.PipelineCache(); pc.SavedBytes != before {
		fmt.Fprintf(w, "kernels: saved %s to %s\n", humanize.IBytes(uint64(pc.SavedBytes)), pc.Path)
	}
}

// cacheTypes reads --cache-type-k and --cache-type-v.
func (m *modelFlags) cacheTypes() (k, v engine.CacheType, err error) {
	if k, err = engine.ParseCacheType(m.cacheTypeK); err != nil {
		return k, v, fmt.Errorf("--cache-type-k: %w", err)
	}
	if v, err = engine.ParseCacheType(m.cacheTypeV); err != nil {
		return k, v, fmt.Errorf("--cache-type-v: %w", err)
	}
	return k, v, nil
}

// parseKVMemory reads --kv-memory: "" (the default), a byte size with a
// unit (2GiB, 512MB, 1.5GB; go-humanize's syntax) or without one, or a
// fraction in (0, 1] of the memory left after the weights (a number with a
// point: 0.5, 1.0).
func parseKVMemory(s string) (bytes int64, frac float64, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, 0, nil
	}
	if strings.Contains(s, ".") {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			if f <= 0 || f > 1 {
				return 0, 0, fmt.Errorf("--kv-memory %q: a fraction must be in (0, 1]; give a size with a unit (2GiB) for bytes", s)
			}
			return 0, f, nil
		}
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > 1<<50 {
		return 0, 0, fmt.Errorf("--kv-memory %q: want a size (2GiB, 512MB) or a fraction (0.5)", s)
	}
	return int64(n), 0, nil
}

// progress draws a bar on a terminal and logs quarter steps otherwise.
type progress struct {
	w       io.Writer
	label   string
	verb    string // what the lines off a terminal say was done ("" = uploaded)
	tty     bool
	lastPct int
	drawn   bool
}

func newProgress(f *os.File, label string) *progress {
	st, err := f.Stat()
	return &progress{w: f, label: label, tty: err == nil && st.Mode()&os.ModeCharDevice != 0, lastPct: -1}
}

func (p *progress) update(done, total int64) {
	if total <= 0 {
		return
	}
	pct := int(done * 100 / total)
	if p.tty {
		if pct == p.lastPct {
			return
		}
		const width = 30
		filled := pct * width / 100
		fmt.Fprintf(p.w, "\r%s [%s%s] %3d%% %.1f/%.1f MiB", p.label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
			pct, float64(done)/(1<<20), float64(total)/(1<<20))
		p.drawn = true
	} else if pct/25 != p.lastPct/25 || p.lastPct < 0 {
		verb := p.verb
		if verb == "" {
			verb = "uploaded"
		}
		fmt.Fprintf(p.w, "%s: %d%% of %.1f MiB %s\n", p.label, pct, float64(total)/(1<<20), verb)
	}
	p.lastPct = pct
}

func (p *progress) done() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// checkpointCount is engine.Config.Checkpoints for --ctx-checkpoints n (0
// there means none, and none is -1 in engine.Config).
func checkpointCount(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
