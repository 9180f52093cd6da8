package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// cmdHealth asks a running server's /health and succeeds only on 200 (the
// model is loaded): the container image's HEALTHCHECK, which has no curl.
// It reads --host and --port like serve, from VKLLM_HOST and VKLLM_PORT
// too, so it finds the server the same settings started; a wildcard host
// (0.0.0.0, ::) is asked on loopback.
func cmdHealth(args []string) error {
	fs := newFlagSet("health")
	var (
		host    string
		port    int
		timeout time.Duration
	)
	fs.StringVar(&host, 0, "host", "127.0.0.1", "the server's `address` (as serve's --host)")
	fs.IntVar(&port, 0, "port", 8080, "the server's `port` (as serve's --port)")
	fs.DurationVar(&timeout, 0, "timeout", 5*time.Second, "the longest `time` to wait for the answer")
	if err := parseFlags(fs, args, true, "vkllm health [--host H] [--port P]"); err != nil {
		return err
	}
	if len(fs.GetArgs()) > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.GetArgs())
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/health"
	c := &http.Client{Timeout: timeout}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, body)
	}
	return nil
}
