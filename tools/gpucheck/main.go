// Command gpucheck turns the results of tools/gpucheck/gpucheck.sh into one
// Markdown report: a table of every model's speeds and the read rates of
// its weights against the measured memory bandwidth.
//
//	gpucheck DIR...
//
// Each DIR (one per device call) holds, per model NAME, NAME.info.json (written by the script: the
// model's shape and file size), NAME.single.json (`vkllm bench --json`:
// pp and tg rows) and NAME.parallel.json (`vkllm bench --parallel 1,16
// --profile --json`). A missing file leaves its columns empty.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// info is NAME.info.json.
type info struct {
	Name   string `json:"name"`
	Class  string `json:"class"`  // "1b", "8b", "small"
	Format string `json:"format"` // "Q4_K_M"
	Shape  string `json:"shape"`  // "2048x16, ffn 8192, vocab 128256"
	Bytes  int64  `json:"bytes"`  // the GGUF file's size
	Gen    string `json:"gen"`    // seconds mkmodel took
}

// single is one row of `vkllm bench --json`.
type single struct {
	Test   string  `json:"test"`
	Mean   float64 `json:"avg_ts"`
	StdDev float64 `json:"stddev_ts"`
}

type rate struct {
	Mean   float64 `json:"avg_ts"`
	StdDev float64 `json:"stddev_ts"`
}

// parallel is one result of `vkllm bench --parallel --profile --json`.
type parallel struct {
	Device    string `json:"device"`
	Parallel  int    `json:"n_parallel"`
	Prompt    int    `json:"n_prompt"`
	Gen       int    `json:"n_gen"`
	PP        *rate  `json:"pp"`
	TG        *rate  `json:"tg"`
	Bandwidth *struct {
		Bytes uint64  `json:"copy_bytes"`
		Reps  int     `json:"repetitions"`
		GBps  float64 `json:"gb_per_s"`
	} `json:"mem_bandwidth"`
	Weights []struct {
		Weights string   `json:"weights"`
		Kernels []string `json:"kernels"`
		Bytes   int64    `json:"bytes_per_step"`
		Micros  float64  `json:"us_per_step"`
		GBps    float64  `json:"gb_per_s"`
		Percent float64  `json:"percent_of_bandwidth"`
	} `json:"weights"`
}

type model struct {
	info     info
	single   []single
	parallel []parallel
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gpucheck DIR...")
		os.Exit(2)
	}
	models, err := read(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(1)
	}
	report(os.Stdout, models)
}

// read loads every NAME.info.json of dirs with its bench results.
func read(dirs []string) ([]model, error) {
	var infos []string
	for _, dir := range dirs {
		got, err := filepath.Glob(filepath.Join(dir, "*.info.json"))
		if err != nil {
			return nil, err
		}
		infos = append(infos, got...)
	}
	var out []model
	for _, p := range infos {
		var m model
		if err := readJSON(p, &m.info); err != nil {
			return nil, err
		}
		base := strings.TrimSuffix(p, ".info.json")
		if err := readJSON(base+".single.json", &m.single); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err := readJSON(base+".parallel.json", &m.parallel); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		out = append(out, m)
	}
	order := map[string]int{"Q4_0": 0, "Q4_K_M": 1, "Q8_0": 2, "F16": 3}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].info, out[j].info
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		return order[a.Format] < order[b.Format]
	})
	return out, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func report(w io.Writer, models []model) {
	device := ""
	for _, m := range models {
		for _, p := range m.parallel {
			device = p.Device
		}
	}
	fmt.Fprintf(w, "## vkllm on %s\n\n", device)
	pp, tg := "pp", "tg" // the single-sequence tests' names: pp512, tg128
	for _, m := range models {
		for _, s := range m.single {
			if strings.HasPrefix(s.Test, "pp") {
				pp = s.Test
			} else {
				tg = s.Test
			}
		}
	}
	fmt.Fprintf(w, "| model | shape | format | GiB | %s t/s | %s t/s | tg t/s, 1 seq | tg t/s, 16 seqs | copy GB/s | weights GB/s, 1 seq | %% of copy |\n", pp, tg)
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, m := range models {
		cells := []string{m.info.Name, m.info.Shape, m.info.Format, fmt.Sprintf("%.2f", float64(m.info.Bytes)/(1<<30))}
		for _, test := range []string{"pp", "tg"} {
			c := "-"
			for _, s := range m.single {
				if strings.HasPrefix(s.Test, test) {
					c = fmt.Sprintf("%.1f ± %.1f", s.Mean, s.StdDev)
				}
			}
			cells = append(cells, c)
		}
		tg := map[int]string{}
		bw, read, pct := "-", "-", "-"
		for _, p := range m.parallel {
			if p.TG != nil {
				tg[p.Parallel] = fmt.Sprintf("%.1f", p.TG.Mean)
			}
			if p.Bandwidth != nil {
				bw = fmt.Sprintf("%.0f", p.Bandwidth.GBps)
			}
			if p.Parallel == 1 && len(p.Weights) > 0 {
				var bytes int64
				var micros float64
				for _, x := range p.Weights {
					bytes += x.Bytes
					micros += x.Micros
				}
				if micros > 0 {
					gbps := float64(bytes) / micros / 1e3
					read = fmt.Sprintf("%.1f", gbps)
					if p.Bandwidth != nil && p.Bandwidth.GBps > 0 {
						pct = fmt.Sprintf("%.0f%%", 100*gbps/p.Bandwidth.GBps)
					}
				}
			}
		}
		for _, n := range []int{1, 16} {
			c := tg[n]
			if c == "" {
				c = "-"
			}
			cells = append(cells, c)
		}
		cells = append(cells, bw, read, pct)
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintf(w, "\n%s and %s: one sequence (`vkllm bench`).", pp, tg)
	fmt.Fprintln(w, " tg t/s, N seqs: the aggregate decode rate of N sequences in one batch (`--parallel 1,16`). copy GB/s: a device-to-device copy, bytes read + written. weights GB/s: the bytes of every matrix a decode step multiplies by, over the device time of those products (timestamps; 1 sequence).")
	for _, m := range models {
		for _, p := range m.parallel {
			if len(p.Weights) == 0 || p.Parallel != 1 { // the JSON has the others
				continue
			}
			fmt.Fprintf(w, "\n### %s, %d sequence(s): weights read per decode step\n\n", m.info.Name, p.Parallel)
			fmt.Fprintln(w, "| weights | kernels | MiB/step | µs/step | GB/s | % of copy |")
			fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
			for _, x := range p.Weights {
				fmt.Fprintf(w, "| %s | %s | %.2f | %.1f | %.1f | %.1f |\n", x.Weights, strings.Join(x.Kernels, ", "), float64(x.Bytes)/(1<<20), x.Micros, x.GBps, x.Percent)
			}
		}
	}
}
