package main

import (
	"strings"
	"testing"
	"time"
)

// TestParseFlags checks the parsing rules every command shares: GNU and
// Go-style long flags, short aliases, VKLLM_* variables only where asked
// for, the command line over the environment, and errors that name the
// flag or the variable.
func TestParseFlags(t *testing.T) {
	type vals struct {
		model string
		port  int
		wait  time.Duration
		json  bool
	}
	parse := func(args []string, env bool) (vals, []string, error) {
		var v vals
		fs := newFlagSet("test")
		fs.StringVar(&v.model, 'm', "model", "", "model")
		fs.IntVar(&v.port, 0, "port", 8080, "port")
		fs.DurationVar(&v.wait, 0, "wait", time.Second, "wait")
		fs.BoolVarDefault(&v.json, 0, "json", false, "json")
		err := parseFlags(fs, args, env)
		return v, fs.GetArgs(), err
	}
	for _, tc := range []struct {
		name string
		args []string
		env  bool
		vars map[string]string
		want vals
		rest string
		err  string
	}{
		{name: "defaults", want: vals{port: 8080, wait: time.Second}},
		{name: "gnu", args: []string{"--model", "a.gguf", "--port=9", "--wait", "2s", "--json"}, want: vals{"a.gguf", 9, 2 * time.Second, true}},
		{name: "go style", args: []string{"-model=a.gguf", "-port", "9", "-json"}, want: vals{"a.gguf", 9, time.Second, true}},
		{name: "short", args: []string{"-m", "b.gguf"}, want: vals{model: "b.gguf", port: 8080, wait: time.Second}},
		{name: "after --", args: []string{"--port", "1", "--", "-port"}, want: vals{port: 1, wait: time.Second}, rest: "-port"},
		{name: "env", env: true, vars: map[string]string{"VKLLM_PORT": "7", "VKLLM_MODEL": "e.gguf", "VKLLM_JSON": "1"},
			want: vals{"e.gguf", 7, time.Second, true}},
		{name: "short env name", env: true, vars: map[string]string{"VKLLM_M": "s.gguf"}, want: vals{"s.gguf", 8080, time.Second, false}},
		{name: "command line wins", env: true, args: []string{"-m", "c.gguf", "--port", "5"}, vars: map[string]string{"VKLLM_PORT": "7", "VKLLM_MODEL": "e.gguf"},
			want: vals{"c.gguf", 5, time.Second, false}},
		{name: "env ignored without env", vars: map[string]string{"VKLLM_PORT": "7"}, want: vals{port: 8080, wait: time.Second}},
		{name: "bad env int", env: true, vars: map[string]string{"VKLLM_PORT": "188o8"}, err: `VKLLM_PORT="188o8"`},
		{name: "bad env duration", env: true, vars: map[string]string{"VKLLM_WAIT": "10"}, err: "VKLLM_WAIT"},
		{name: "bad env bool", env: true, vars: map[string]string{"VKLLM_JSON": "yes"}, err: "VKLLM_JSON"},
		{name: "bad flag", args: []string{"--port", "x"}, err: "port"},
		{name: "unknown flag", args: []string{"--nope"}, err: "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.vars {
				t.Setenv(k, v)
			}
			got, rest, err := parse(tc.args, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("parseFlags(%q) = %v, want an error naming %s", tc.args, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || strings.Join(rest, " ") != tc.rest {
				t.Errorf("parseFlags(%q) = %+v, rest %q, %v; want %+v, rest %q", tc.args, got, rest, err, tc.want, tc.rest)
			}
		})
	}
}

// TestCacheDirFlag checks --cache-dir: the user's cache folder by default,
// a folder as given, and off for none and "".
func TestCacheDirFlag(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/cache-home")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"default", nil, "/cache-home/vkllm"},
		{"folder", []string{"--cache-dir", "/var/cache/x"}, "/var/cache/x"},
		{"none", []string{"--cache-dir", "none"}, ""},
		{"empty", []string{"--cache-dir", ""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m modelFlags
			fs := newFlagSet("test")
			m.register(fs, 0, true)
			if err := parseFlags(fs, tc.args, true); err != nil {
				t.Fatal(err)
			}
			if got := m.pipelineCacheDir(); got != tc.want {
				t.Errorf("pipelineCacheDir() after %q = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}
