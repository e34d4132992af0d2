package pebble

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
)

// The check reports entries that went missing, entries no profile backs,
// and a count that disagrees, and nothing else.
func TestCheckReportsDrift(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, nil)
	s.Start(ctx)
	const email = "drift@example.com"
	p := partmap.PartitionOf(email, partmap.DefaultPartitions)
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "companyName": "Acme", "customerTier": "gold"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.CheckPartition(ctx, p); err != nil || !c.OK() || c.IndexEntries != 2 {
		t.Fatalf("before the damage: %+v %v", c, err)
	}
	// Damage the partition behind the store's back.
	b := s.db.NewBatch()
	b.Delete(indexKey(nil, p, engine.IndexEntry{Field: 1, Value: "gold", Email: email}), nil)
	b.Set(indexKey(nil, p, engine.IndexEntry{Field: 0, Value: "Globex", Email: "ghost@example.com"}), nil, nil)
	b.Set(countKey(nil, p), binary.AppendUvarint(nil, 3), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	storetest.WantDrift(t, s, p, email)
	// A search sees what the index says: the lost entry hides the profile.
	page, err := s.ListProfiles(ctx, partmap.ListOptions{Where: []partmap.Match{{Field: "customerTier", Value: "gold"}}})
	if err != nil || len(page.Profiles) != 0 {
		t.Fatalf("search after the damage: %v %v", page, err)
	}
}

// The indexed fields are chosen when a directory is created and kept.
func TestIndexesArePersisted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Indexes: []string{"city"}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(ctx)
	partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "a@b.c", "city": "Oslo"}, partmap.Condition{})
	s.Close()

	for _, tc := range []struct {
		want []string
		ok   bool
	}{{nil, true}, {[]string{"city"}, true}, {[]string{"companyName"}, false}, {[]string{"city", "city"}, false}} {
		s, err := Open(dir, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Indexes: tc.want}})
		if (err == nil) != tc.ok {
			t.Fatalf("reopen with %v: %v", tc.want, err)
		}
		if err != nil {
			continue
		}
		stats, _ := s.ListPartitions(ctx)
		page, err := s.ListProfiles(ctx, partmap.ListOptions{Where: []partmap.Match{{Field: "city", Value: "Oslo"}}})
		s.Close()
		if !slices.Equal(stats.Indexes, []string{"city"}) || err != nil || len(page.Profiles) != 1 {
			t.Fatalf("reopen with %v: indexes %v, search %v %v", tc.want, stats.Indexes, page, err)
		}
	}
	none, err := Open(t.TempDir(), &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Indexes: []string{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	none.Start(ctx)
	if stats, err := none.ListPartitions(ctx); err != nil || len(stats.Indexes) != 0 {
		t.Fatalf("a directory made with no indexes has %v (%v)", stats.Indexes, err)
	}
	if _, err := none.ListProfiles(ctx, partmap.ListOptions{Where: []partmap.Match{{Field: "companyName", Value: "x"}}}); partmap.ErrorCode(err) != partmap.EINVALID {
		t.Fatalf("search without indexes: %v", err)
	}
}

// A directory with a search index is schema 3, which an older partmap
// refuses; once every index is dropped and cleaned, it is schema 2 again.
func TestSchemaFollowsSearchIndexes(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, nil)
	s.Start(ctx)
	schema := func() int {
		raw, closer, err := s.db.Get(metaKey)
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		var m struct{ Schema int }
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return m.Schema
	}
	if got := schema(); got != 2 {
		t.Fatalf("a new directory is schema %d, want 2", got)
	}
	def := partmap.IndexDefinition{Name: "desk", Fields: []partmap.IndexField{{Name: "fullName", Type: partmap.IndexText}}}
	if err := s.CreateIndex(ctx, def); err != nil {
		t.Fatal(err)
	}
	if got := schema(); got != 3 {
		t.Fatalf("with a search index: schema %d, want 3", got)
	}
	if err := s.DropIndex(ctx, "desk"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for schema() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("schema %d after the drop was cleaned, want 2", schema())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
