package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/partmap/partmap/internal/bench"
)

// partmap bench runs every workload, the ceiling and the bucket baseline,
// and reports them as JSON. Speed is not asserted here: see
// docs/PERFORMANCE.md.
func TestBenchCommand(t *testing.T) {
	code, out, errOut := run(t, "", "bench", "--embedded", "--preload", "2000", "--clients", "8", "--duration", "150ms",
		"--ceiling", "--baseline", "bucket", "--baseline-sizes", "500", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	seen := map[string]bool{}
	for _, r := range rep.Runs {
		seen[r.Target+"/"+r.Workload] = true
		if r.Ops == 0 || r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 || r.P999 < r.P99 {
			t.Errorf("%s/%s: %+v", r.Target, r.Workload, r)
		}
	}
	for _, want := range []string{"partmap/upsert", "partmap/get", "partmap/mix", "partmap/patch", "partmap/incr", "partmap/hot",
		"partmap/zipf", "ceiling/upsert", "ceiling/get", "partmap@500/upsert", "bucket@500/upsert"} {
		if !seen[want] {
			t.Errorf("no run %s", want)
		}
	}
	for _, want := range []string{"upsert ops/s partmap/ceiling", "get p99 partmap/ceiling", "upsert ops/s partmap/bucket at 500"} {
		if rep.Ratios[want] <= 0 {
			t.Errorf("no ratio %q: %v", want, rep.Ratios)
		}
	}
	if !strings.Contains(errOut, "preloaded") {
		t.Errorf("no preload summary: %q", errOut)
	}
	for _, args := range [][]string{{"bench"}, {"bench", "--embedded", "--workloads", "nope"}, {"bench", "--server", "http://x", "--baseline", "bucket"}} {
		if code, _, _ := run(t, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
