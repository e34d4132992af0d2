package pebble_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

// BenchmarkGroupedSet measures what the Redis protocol's event loop asks
// of the store in a turn, without its sockets: one transaction of 25
// single-field writes of distinct profiles whose operations fail alone
// (an HSET each), over 100,000 profiles the record cache holds, waiting
// for the fsync before the next group. cpu-ns/write is the process's CPU
// per write, Pebble's goroutines (WAL writer, flushes, compactions)
// included: partmap's own cost of a durable write, which noise moves
// less than the rate, and which issue 35 sets against Redis's whole
// command (docs/PERFORMANCE.md).
//
//	go test -run '^$' -bench BenchmarkGroupedSet -benchtime 4000x -count 3 ./pebble
func BenchmarkGroupedSet(b *testing.B) {
	ctx := context.Background()
	s := pebble.MustStart(b, nil)
	const keys, group = 100_000, 25
	emails := make([]string, keys)
	for i := range emails {
		emails[i] = fmt.Sprintf("u%012d@x.io", i)
	}
	for chunk := 0; chunk < keys; chunk += partmap.MaxBulkProfiles {
		profiles := make([]partmap.Profile, 0, partmap.MaxBulkProfiles)
		for _, e := range emails[chunk:min(chunk+partmap.MaxBulkProfiles, keys)] {
			profiles = append(profiles, partmap.Profile{partmap.FieldEmail: e, "fullName": "v0"})
		}
		if _, err := s.UpsertProfiles(ctx, profiles); err != nil {
			b.Fatal(err)
		}
	}
	for _, e := range emails { // a bulk write leaves its records out of the cache
		if _, err := s.FindProfile(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([]partmap.Operation, 0, group)
	seen := make(map[int]bool, group)
	writes := 0
	hits, misses := counter(b, s, "partmap_pebble_record_cache_hits_total"), counter(b, s, "partmap_pebble_record_cache_misses_total")
	h0, m0 := hits(), misses()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		ops, writes = ops[:0], writes+group
		clear(seen)
		for len(ops) < group {
			k := rng.IntN(keys)
			if seen[k] {
				continue
			}
			seen[k] = true
			v := fmt.Sprintf("v%d", rng.IntN(keys))
			ops = append(ops, partmap.Operation{Op: partmap.OpSetFields, Email: emails[k], Set: partmap.Patch{"fullName": &v}, FailAlone: true})
		}
		turn, durable := partmap.DeferDurability(partmap.NoLockWait(ctx))
		results, err := s.Transact(turn, ops)
		if err == nil {
			err = durable()
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(writes), "cpu-ns/write")
	b.ReportMetric(float64(b.Elapsed())/float64(writes), "ns/write")
	h, m := hits()-h0, misses()-m0
	b.ReportMetric(m/(h+m), "cache-miss-ratio")
}
