package main

import (
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func TestCountCollections(t *testing.T) {
	log := `time=2026-12-04T01:34:53.338Z level=INFO msg=serving addr=http://127.0.0.1:29112
gc 1 @0.012s 2%: 0.010+1.2+0.003 ms clock, 0.021+0.1/0.5/0+0.006 ms cpu, 4->4->2 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 2 @0.514s 3%: 0.011+2.0+0.004 ms clock, 0.022+0.2/0.9/0+0.008 ms cpu, 8->9->5 MB, 9 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)
scvg: inuse: 3, idle: 1, sys: 4, released: 0, consumed: 4 (MB)
a log line that mentions gc 3 @ in passing
`
	if got, want := countCollections([]byte(log)), 2; got != want {
		t.Fatalf("got %d, want %d", got, want)
	}
}

func TestGCShare(t *testing.T) {
	fn := map[string]*profile.Function{}
	loc := func(names ...string) []*profile.Location {
		var ls []*profile.Location
		for _, n := range names {
			if fn[n] == nil {
				fn[n] = &profile.Function{ID: uint64(len(fn) + 1), Name: n}
			}
			ls = append(ls, &profile.Location{Line: []profile.Line{{Function: fn[n]}}})
		}
		return ls
	}
	ms := int64(time.Millisecond)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Value: []int64{1, 30 * ms}, Location: loc("runtime.scanSpan", "runtime.gcDrain", "runtime.gcBgMarkWorker")},
			{Value: []int64{1, 10 * ms}, Location: loc("runtime.gcWriteBarrier2", "github.com/partmap/partmap.ParseProfileJSON")},
			{Value: []int64{1, 10 * ms}, Location: loc("runtime.(*sweepLocked).sweep", "runtime.(*mcentral).cacheSpan", "runtime.mallocgc")},
			{Value: []int64{1, 50 * ms}, Location: loc("runtime.mallocgc", "github.com/cockroachdb/pebble/v2.(*DB).Apply")},
			{Value: []int64{1, 100 * ms}, Location: loc("runtime.memmove", "runtime.gcStartish")},
		},
	}
	share, sampled := gcShare(p)
	if share != 0.25 || sampled != 200*time.Millisecond {
		t.Fatalf("got %.3f of %v, want 0.25 of 200ms", share, sampled)
	}
}
