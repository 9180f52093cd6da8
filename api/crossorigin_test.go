package api

import (
	"strings"
	"testing"
)

// The cases of Go's net/http CrossOriginProtection tests (csrf_test.go),
// run against the server: its rule is the one crossOrigin follows, with
// --cors-origins as the trusted origins. Go's handler answers 200 to what
// passes; here a POST that passes is a completion (200), GET and HEAD ask
// for /health, OPTIONS gets the router's automatic answer (200, the
// allowed methods) and PUT, having no route, would be a 404. The requests
// carry no JSON content type, as curl -d sends none.

// TestCrossOriginSecFetchSite: TestCrossOriginProtectionSecFetchSite.
func TestCrossOriginSecFetchSite(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{AllowedHosts: []string{"example.com"}})
	for _, tc := range []struct {
		name         string
		method       string
		secFetchSite string
		origin       string
		status       int
	}{
		{"same-origin allowed", "POST", "same-origin", "", 200},
		{"none allowed", "POST", "none", "", 200},
		{"cross-site blocked", "POST", "cross-site", "", 403},
		{"same-site blocked", "POST", "same-site", "", 403},

		{"no header with no origin", "POST", "", "", 200},
		{"no header with matching origin", "POST", "", "https://example.com", 200},
		{"no header with mismatched origin", "POST", "", "https://attacker.example", 403},
		{"no header with null origin", "POST", "", "null", 403},

		{"GET allowed", "GET", "cross-site", "", 200},
		{"HEAD allowed", "HEAD", "cross-site", "", 200},
		{"OPTIONS allowed", "OPTIONS", "cross-site", "", 200},
		{"PUT blocked", "PUT", "cross-site", "", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/completions"
			if tc.method == "GET" || tc.method == "HEAD" {
				path = "/health"
			}
			r := ts.doHost(tc.method, path, `{"prompt":"x","max_tokens":2}`, "example.com", "text/plain", crossOriginHeaders(tc.secFetchSite, tc.origin)...)
			if r.status != tc.status {
				t.Errorf("%s %s with Sec-Fetch-Site %q, Origin %q = %d %s, want %d", tc.method, path, tc.secFetchSite, tc.origin, r.status, r.body, tc.status)
			}
			if r.status == 403 && !strings.Contains(string(r.body), "--cors-origins") {
				t.Errorf("%s %s: 403 %s, want the message to name --cors-origins", tc.method, path, r.body)
			}
		})
	}
}

// TestCrossOriginTrustedOrigin: TestCrossOriginProtectionTrustedOriginBypass
// and the trusted-origin cases of TestCrossOriginProtectionServer, with
// the origin in --cors-origins (which also gets the CORS headers).
func TestCrossOriginTrustedOrigin(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{CORSOrigins: []string{"https://trusted.example"}})
	for _, tc := range []struct {
		name         string
		origin       string
		secFetchSite string
		status       int
	}{
		{"trusted origin without sec-fetch-site", "https://trusted.example", "", 200},
		{"trusted origin with cross-site", "https://trusted.example", "cross-site", 200},
		{"untrusted origin without sec-fetch-site", "https://attacker.example", "", 403},
		{"untrusted origin with cross-site", "https://attacker.example", "cross-site", 403},
		// TestCrossOriginProtectionServer.
		{"same-origin", "", "same-origin", 200},
		{"origin matches host", ts.base, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.doHost("POST", "/v1/completions", `{"prompt":"x","max_tokens":2}`, "", "", crossOriginHeaders(tc.secFetchSite, tc.origin)...)
			if r.status != tc.status {
				t.Errorf("POST with Sec-Fetch-Site %q, Origin %q = %d %s, want %d", tc.secFetchSite, tc.origin, r.status, r.body, tc.status)
			}
			wantCORS := ""
			if tc.origin == "https://trusted.example" {
				wantCORS = tc.origin
			}
			if got := r.header.Get("Access-Control-Allow-Origin"); got != wantCORS {
				t.Errorf("POST with Origin %q: Access-Control-Allow-Origin %q, want %q", tc.origin, got, wantCORS)
			}
		})
	}
	// "*" trusts every origin.
	ts = newReadyServer(t, newFake(), Config{CORSOrigins: []string{"*"}})
	if r := ts.doHost("POST", "/v1/completions", `{"prompt":"x","max_tokens":2}`, "", "", "Origin", "https://any.example", "Sec-Fetch-Site", "cross-site"); r.status != 200 {
		t.Errorf("POST from https://any.example with --cors-origins '*' = %d %s, want 200", r.status, r.body)
	}
}

// crossOriginHeaders returns the header pairs for doHost; "" leaves a
// header out.
func crossOriginHeaders(secFetchSite, origin string) []string {
	var hdr []string
	if secFetchSite != "" {
		hdr = append(hdr, "Sec-Fetch-Site", secFetchSite)
	}
	if origin != "" {
		hdr = append(hdr, "Origin", origin)
	}
	return hdr
}

// TestCheckCORSOrigins: TestCrossOriginProtectionAddTrustedOriginErrors,
// plus "*".
func TestCheckCORSOrigins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		origin  string
		wantErr bool
	}{
		{"valid origin", "https://example.com", false},
		{"valid origin with port", "https://example.com:8080", false},
		{"http origin", "http://example.com", false},
		{"any origin", "*", false},
		{"missing scheme", "example.com", true},
		{"missing host", "https://", true},
		{"trailing slash", "https://example.com/", true},
		{"with path", "https://example.com/path", true},
		{"with query", "https://example.com?query=value", true},
		{"with fragment", "https://example.com#fragment", true},
		{"invalid url", "https://ex ample.com", true},
		{"empty string", "", true},
		{"null", "null", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckCORSOrigins([]string{"https://ok.example", tc.origin})
			if (err != nil) != tc.wantErr {
				t.Errorf("CheckCORSOrigins(%q) = %v, want error %v", tc.origin, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--cors-origins") {
				t.Errorf("CheckCORSOrigins(%q) = %v, want it to name --cors-origins", tc.origin, err)
			}
		})
	}
}
