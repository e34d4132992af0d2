package pebble

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
)

// Pebble charges memtables to the block cache. When the cache was only as
// large as the blocks' share, two full memtables reserved all of it after
// the first flush, and from then on every read missed.
func TestBlockCacheSurvivesFullMemtables(t *testing.T) {
	ctx := context.Background()
	s := MustStart(t, nil)
	const profiles = 1000
	note := strings.Repeat("x", 16<<10)
	email := func(i int) string { return fmt.Sprintf("user%d@example.com", i) }
	// 96 MB of writes grow memtables to their full size (32 MB), fill and
	// flush several, and set off compactions.
	for round := range 6 {
		ps := make([]partmap.Profile, profiles)
		for i := range ps {
			ps[i] = partmap.Profile{"emailAddress": email(i), "note": fmt.Sprint(round, note)}
		}
		if _, err := s.UpsertProfiles(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Settle the tree, so that no compaction replaces the tables being
	// read; the memtables keep their reservations.
	if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	read := func() {
		for i := range profiles {
			if _, err := s.FindProfile(ctx, email(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	read() // the first reads of the flushed tables miss
	before := s.db.Metrics().BlockCache
	read()
	after := s.db.Metrics().BlockCache
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	if m := s.db.Metrics(); m.Flush.Count < 2 {
		t.Fatalf("only %d flushes: the test did not fill the memtables", m.Flush.Count)
	}
	if misses*10 > hits {
		t.Fatalf("reading the same %d profiles again: %d block cache hits, %d misses (cache holds %d bytes); the cache is not caching",
			profiles, hits, misses, after.Size)
	}
}

func TestCollectorsExportPebbleFigures(t *testing.T) {
	s, _ := MustOpen(t, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"partmap_pebble_block_cache_hits_total", "partmap_pebble_block_cache_misses_total",
		"partmap_pebble_record_cache_hits_total", "partmap_pebble_record_cache_misses_total", "partmap_pebble_l0_files", "partmap_pebble_memtable_bytes"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not exported; got %v", want, names)
		}
	}
}
