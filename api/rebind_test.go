package api

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startServerOn starts a ready fake server listening on addr and returns
// it with a base URL reaching it over loopback.
func startServerOn(t *testing.T, addr string, cfg Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen %s: %v", addr, err)
	}
	s := NewServer(cfg)
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	if err := s.Ready(newFake()); err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return &testServer{t: t, s: s, base: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// TestHostOnAllAddresses: a server listening on every address (0.0.0.0,
// the Docker default) answers the Host names a DNS-rebinding page cannot
// bring (IP addresses, names without a dot, private suffixes, its
// hostname) and refuses public names with a 403 saying how to allow them,
// unless they are listed in --allowed-hosts or an API key is set.
func TestHostOnAllAddresses(t *testing.T) {
	hostname, _ := os.Hostname()
	body := `{"prompt":"x","max_tokens":2}`
	for _, tc := range []struct {
		name string
		cfg  Config
		host string
		want int
	}{
		{"loopback ip", Config{}, "127.0.0.1:8080", 200},
		{"lan ip", Config{}, "192.168.1.5:8080", 200},
		{"ipv6", Config{}, "[fe80::1]:8080", 200},
		{"localhost", Config{}, "localhost:8080", 200},
		{"docker service", Config{}, "vkllm:8080", 200},
		{"mdns", Config{}, "box.local", 200},
		{"internal", Config{}, "llm.corp.internal:8080", 200},
		{"home.arpa", Config{}, "box.home.arpa", 200},
		{"sub.localhost", Config{}, "app.localhost:3000", 200},
		{"hostname", Config{}, hostname, 200},
		{"rebound name", Config{}, "rebind.attacker.example:8080", 403},
		{"rebound name trailing dot", Config{}, "rebind.attacker.example.", 403},
		{"ip-looking name", Config{}, "127.0.0.1.attacker.example", 403},
		{"public name", Config{}, "llm.example.com", 403},
		{"listed", Config{AllowedHosts: []string{"llm.example.com"}}, "llm.example.com", 200},
		{"listed, others strict", Config{AllowedHosts: []string{"llm.example.com"}}, "vkllm:8080", 403},
		{"star", Config{AllowedHosts: []string{"*"}}, "rebind.attacker.example", 200},
		{"api key", Config{APIKey: "k"}, "rebind.attacker.example", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServerOn(t, "0.0.0.0:0", tc.cfg)
			var hdr []string
			if tc.cfg.APIKey != "" {
				hdr = []string{"Authorization", "Bearer " + tc.cfg.APIKey}
			}
			r := ts.doHost("POST", "/v1/completions", body, tc.host, "application/json", hdr...)
			if r.status != tc.want {
				t.Fatalf("Host %q: status %d, want %d: %s", tc.host, r.status, tc.want, r.body)
			}
			if tc.want == 403 {
				msg := errorOf(t, r.body)["message"]
				if !strings.Contains(msg.(string), "--allowed-hosts") {
					t.Errorf("Host %q: message %q, want it to name --allowed-hosts", tc.host, msg)
				}
			}
		})
	}
	t.Run("loopback listener unchanged", func(t *testing.T) {
		ts := startServerOn(t, "127.0.0.1:0", Config{})
		for host, want := range map[string]int{"localhost:8080": 200, "127.0.0.2": 200, "vkllm:8080": 403, "192.168.1.5": 403} {
			if r := ts.doHost("POST", "/v1/completions", body, host, "application/json"); r.status != want {
				t.Errorf("loopback listener, Host %q: status %d, want %d", host, r.status, want)
			}
		}
	})
}
