package main

import "testing"

func TestParseKVMemory(t *testing.T) {
	for _, tc := range []struct {
		in    string
		bytes int64
		frac  float64
		bad   bool
	}{
		{in: ""},
		{in: "2GiB", bytes: 2 << 30},
		{in: "512MB", bytes: 512e6},
		{in: "1.5 GiB", bytes: 3 << 29},
		{in: "1048576", bytes: 1 << 20},
		{in: "0.5", frac: 0.5},
		{in: "1.0", frac: 1},
		{in: "1.5", bad: true},
		{in: "0.0", bad: true},
		{in: "-1GiB", bad: true},
		{in: "lots", bad: true},
		{in: "0", bad: true},
	} {
		b, f, err := parseKVMemory(tc.in)
		if (err != nil) != tc.bad || b != tc.bytes || f != tc.frac {
			t.Errorf("parseKVMemory(%q) = %d, %g, %v; want %d, %g, error %v", tc.in, b, f, err, tc.bytes, tc.frac, tc.bad)
		}
	}
}
