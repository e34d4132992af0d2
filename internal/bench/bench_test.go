package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Embedded: true, Clients: 1, Preload: 1, Duration: time.Millisecond, Workloads: AllWorkloads}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"OK", func(*Config) {}, ""},
		{"OKServer", func(c *Config) { c.Embedded, c.Server = false, "http://127.0.0.1:8080" }, ""},
		{"OKBaseline", func(c *Config) { c.Baseline, c.BaselineSizes = "bucket", []int{10} }, ""},
		{"ErrNoTarget", func(c *Config) { c.Embedded = false }, "give --server URL"},
		{"ErrBothTargets", func(c *Config) { c.Server = "http://127.0.0.1:8080" }, "exclude each other"},
		{"ErrServerURL", func(c *Config) { c.Embedded, c.Server = false, "ftp://x" }, "not an http:// or https:// URL"},
		{"ErrClients", func(c *Config) { c.Clients = 0 }, "--clients"},
		{"ErrPreload", func(c *Config) { c.Preload = 0 }, "--preload"},
		{"ErrDuration", func(c *Config) { c.Duration = 0 }, "--duration"},
		{"ErrWorkload", func(c *Config) { c.Workloads = []string{"get", "nope"} }, `unknown workload "nope"`},
		{"ErrBaseline", func(c *Config) { c.Baseline = "sqlite" }, "only bucket"},
		{"ErrBaselineNotEmbedded", func(c *Config) { c.Embedded, c.Server, c.Baseline = false, "http://x", "bucket" }, "add --embedded"},
		{"ErrBaselineSize", func(c *Config) { c.Baseline, c.BaselineSizes = "bucket", []int{10, 0} }, "--baseline-sizes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			// Run refuses what Validate refuses, before it starts anything.
			if tc.want != "" {
				var out bytes.Buffer
				if err := Run(context.Background(), c, &out); err == nil || out.Len() != 0 {
					t.Fatalf("Run: %v, wrote %q", err, out.String())
				}
			}
		})
	}
}

// Run writes a table row as each workload ends, then the ratios, and its
// notes to Log.
func TestRunTable(t *testing.T) {
	var out, log bytes.Buffer
	err := Run(context.Background(), Config{Embedded: true, Clients: 2, Preload: 300, Duration: 50 * time.Millisecond,
		Workloads: []string{Get, Patch}, Ceiling: true, Log: &log}, &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 6 || !strings.HasPrefix(lines[0], "target           workload clients     ops/s") ||
		!strings.HasPrefix(lines[1], "partmap          get            2 ") ||
		!strings.HasPrefix(lines[2], "partmap          patch          2 ") ||
		!strings.HasPrefix(lines[3], "ceiling          get            2 ") || // the ceiling serves no patch
		lines[4] != "" || lines[5] != "ratios" {
		t.Fatalf("got\n%s", out.String())
	}
	want := []string{"  get ops/s partmap/ceiling ", "  get p99 partmap/ceiling "}
	if peakRSS() > 0 { // Linux
		want = append(want, "\npeak RSS of this process (server and load generator): ")
	}
	for _, want := range want {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if got := log.String(); !strings.HasPrefix(got, "preloaded 500 profiles into partmap in ") {
		t.Errorf("log %q: want the preload summary of 300 profiles and 200 hot ones", got)
	}
}

// A CPU profile covers the run: pprof's gzipped protobuf, not empty.
func TestRunCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	err := Run(context.Background(), Config{Embedded: true, Clients: 1, Preload: 10, Duration: 20 * time.Millisecond,
		Workloads: []string{Get}, JSON: true, CPUProfile: path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("profile of %d bytes, want a gzipped one", len(b))
	}
	if err := Run(context.Background(), Config{Embedded: true, Clients: 1, Preload: 10, Duration: time.Millisecond,
		Workloads: []string{Get}, CPUProfile: filepath.Join(path, "under-a-file")}, io.Discard); err == nil {
		t.Fatal("ran without the profile it was asked for")
	}
}
