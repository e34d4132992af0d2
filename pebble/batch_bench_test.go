package pebble_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// BenchmarkBatch measures batch lookups of 1 to 1,000 profiles picked at
// random among 10,000, a fifth of them absent, in a store whose record
// cache holds them all (as after they were written) and in one without a
// record cache, and reports the process's CPU per lookup beside the time:
// a batch of one partition reads it with one backend read, and one of
// several partitions reads them all from one view (GetView).
//
//	go test -run '^$' -bench BenchmarkBatch -benchtime 2s ./pebble
func BenchmarkBatch(b *testing.B) {
	ctx := context.Background()
	const stored = 10_000
	var all []string
	for i := range stored {
		all = append(all, fmt.Sprintf("batch%d@example.com", i))
	}
	for _, cache := range []struct {
		name  string
		bytes int64
	}{{"cached", 0}, {"uncached", -1}} {
		opts := pebble.Options{}
		opts.RecordCacheBytes = cache.bytes
		s := pebble.MustStart(b, &opts)
		for i := 0; i < stored; i += 1000 {
			var ps []partmap.Profile
			for _, e := range all[i : i+1000] {
				ps = append(ps, partmap.Profile{partmap.FieldEmail: e, "fullName": "Bench User", "companyName": "Acme Corp", "customerTier": "gold"})
			}
			if _, err := s.UpsertProfiles(ctx, ps); err != nil {
				b.Fatal(err)
			}
		}
		asked := all[: stored*4/5 : stored*4/5]
		for i := range stored / 5 {
			asked = append(asked, fmt.Sprintf("absent%d@example.com", i))
		}
		// Two profiles of two partitions: a rename's addresses.
		two, other := storetest.Spread(2, "batch")[0], ""
		for _, e := range all {
			if partmap.PartitionOf(e, partmap.DefaultPartitions) != partmap.PartitionOf(two, partmap.DefaultPartitions) {
				other = e
				break
			}
		}
		b.Run(cache.name+"/find", func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			cpu := processCPU()
			for range b.N {
				s.FindProfile(ctx, asked[rng.IntN(len(asked))]) // absent is an answer too
			}
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
		b.Run(cache.name+"/two-partitions", func(b *testing.B) {
			cpu := processCPU()
			for range b.N {
				if _, err := s.FindProfiles(ctx, []string{two, other}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
		for _, n := range []int{1, 16, 100, 1000} {
			b.Run(fmt.Sprintf("%s/emails=%d", cache.name, n), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(uint64(n), 3))
				ask := make([]string, n)
				cpu := processCPU()
				for range b.N {
					for i := range ask {
						ask[i] = asked[rng.IntN(len(asked))]
					}
					if _, err := s.FindProfiles(ctx, ask); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
