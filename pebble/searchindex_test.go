package pebble_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// A dropped or re-created search index leaves no entry behind, and each
// incarnation of a name gets its own build and its own cleaning, whatever
// lands in a partition while the background work waits for its lock.
// Holding a partition's lock (Engine.Hold) stops that work at the
// partition, so that a write can land exactly there.
func TestSearchIndexDropLeavesNoEntries(t *testing.T) {
	ctx := context.Background()
	const partitions = 16
	const email = "held@example.com"
	part := engine.Part{Partition: partmap.PartitionOf(email, partitions)}
	def := partmap.IndexDefinition{Name: "x", Fields: []partmap.IndexField{{Name: "a", Type: partmap.IndexTag}}}
	open := func(t *testing.T) *pebble.Store {
		o := pebble.Options{}
		o.Partitions = partitions
		s := pebble.MustStart(t, &o)
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "a": "v"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	hold := func(t *testing.T, s *pebble.Store) engine.Lease {
		lease, err := s.Engine().Hold(ctx, []engine.Part{part}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lease.Release() })
		return lease
	}
	// searchEntries are the partition's search entries, of any index.
	searchEntries := func(t *testing.T, s *pebble.Store) []engine.IndexEntry {
		var out []engine.IndexEntry
		err := s.Engine().Invoke(ctx, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}, func(tx *engine.Tx) error {
			all, err := tx.IndexEntries(part)
			for _, e := range all {
				if e.Field >= engine.SearchFieldBase {
					out = append(out, e)
				}
			}
			return err
		})
		if err != nil && partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
			t.Fatal(err)
		}
		return out
	}
	// gone waits up to five seconds for the partition to hold no search
	// entry.
	gone := func(t *testing.T, s *pebble.Store) {
		t.Helper()
		var left []engine.IndexEntry
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if left = searchEntries(t, s); len(left) == 0 {
				return
			}
		}
		t.Fatalf("the dropped index's entries are still there: %+v", left)
	}
	// cleaned waits up to five seconds for every dropped index's entries
	// to be removed: until then a resize is refused.
	cleaned := func(t *testing.T, s *pebble.Store) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err = s.Resize(ctx, partitions+1); partmap.ErrorCode(err) != partmap.ECONFLICT {
				break
			}
		}
		if err != nil {
			t.Fatalf("a resize after every drop: %v", err)
		}
	}
	waitBuilt := func(t *testing.T, s *pebble.Store, name string) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err = s.Search(ctx, name, partmap.SearchOptions{Query: "*"}); partmap.ErrorCode(err) != partmap.EUNAVAILABLE {
				break
			}
		}
		if err != nil {
			t.Fatalf("index %s: %v", name, err)
		}
	}
	createBuilt := func(t *testing.T, s *pebble.Store) {
		if err := s.CreateIndex(ctx, def); err != nil {
			t.Fatal(err)
		}
		waitBuilt(t, s, def.Name)
	}

	// The drop's cleaner finds the profile's entries, and waits for the
	// lock; the profile is deleted meanwhile. Its entries must go all the
	// same: the cleaner, which removes a record's entries, finds no
	// record, and unless the delete removed them nothing ever would.
	t.Run("OfAProfileDeletedMeanwhile", func(t *testing.T) {
		s := open(t)
		createBuilt(t, s)
		lease := hold(t, s)
		if err := s.DropIndex(ctx, def.Name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the cleaner reads the partition
		err := s.Engine().InvokeHeld(ctx, lease, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}, func(tx *engine.Tx) error {
			return tx.Delete(part, email, partmap.OpDelete)
		})
		if err != nil {
			t.Fatal(err)
		}
		lease.Release()
		gone(t, s)
	})

	// An entry committed after the cleaner read the partition, as a
	// writer's that computed its entries before the drop and committed
	// just after, must go too: the cleaner reads under the lock.
	t.Run("WrittenAfterTheCleanerRead", func(t *testing.T) {
		s := open(t)
		createBuilt(t, s)
		lease := hold(t, s)
		if err := s.DropIndex(ctx, def.Name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		late := engine.IndexEntry{Field: engine.SearchFieldBase, Value: "w", Email: email} // the index's first field, its first slot
		err := s.Engine().InvokeHeld(ctx, lease, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}, func(tx *engine.Tx) error {
			return tx.Reindex(part, email, nil, nil, []engine.IndexEntry{late})
		})
		if err != nil {
			t.Fatal(err)
		}
		lease.Release()
		gone(t, s)
	})

	// The build waits for the partition's lock while the index is
	// dropped and its cleaner passes the partition, where there is
	// nothing yet: the build must not write there once it goes on.
	t.Run("OfABuildThatOutlivesTheDrop", func(t *testing.T) {
		s := open(t)
		lease := hold(t, s)
		if err := s.CreateIndex(ctx, def); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the build reaches the partition
		if err := s.DropIndex(ctx, def.Name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the cleaner passes
		lease.Release()
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if left := searchEntries(t, s); len(left) > 0 {
				t.Fatalf("the build of the dropped index wrote %+v", left)
			}
		}
		cleaned(t, s)
	})

	// An index dropped, created again under the same name and dropped
	// again while the first cleaning waits: both are cleaned.
	t.Run("DroppedTwiceUnderOneName", func(t *testing.T) {
		s := open(t)
		createBuilt(t, s)
		lease := hold(t, s)
		for range 2 {
			if err := s.DropIndex(ctx, def.Name); err != nil {
				t.Fatal(err)
			}
			if err := s.CreateIndex(ctx, def); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DropIndex(ctx, def.Name); err != nil {
			t.Fatal(err)
		}
		lease.Release()
		cleaned(t, s)
		gone(t, s)
	})

	// An index created again under the name of one dropped while it was
	// building is built, though the first build still waits.
	t.Run("CreatedAgainWhileTheFirstBuilds", func(t *testing.T) {
		s := open(t)
		lease := hold(t, s)
		if err := s.CreateIndex(ctx, def); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the build reaches the partition
		if err := s.DropIndex(ctx, def.Name); err != nil {
			t.Fatal(err)
		}
		other := def
		other.Fields = []partmap.IndexField{{Name: "a", Type: partmap.IndexText}}
		if err := s.CreateIndex(ctx, other); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		lease.Release()
		waitBuilt(t, s, def.Name)
		res, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: "v"})
		if err != nil || res.Total != 1 {
			t.Fatalf("search of the new index: %+v %v", res, err)
		}
		if c, err := s.CheckPartition(ctx, part.Partition); err != nil || !c.OK() {
			t.Fatalf("check: %+v %v", c, err)
		}
	})
}

// A sorted search with more matches than the directory sorts in memory
// merges the partitions' sort keys. A field whose deadline has passed
// keeps its sort key until the sweeper reclaims it; the profile must sort
// as one without the field all the same, last.
func TestSortedSearchSkipsExpiredSortKeys(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	o := pebble.Options{}
	o.Partitions, o.Clock, o.SweepInterval = 16, clock.Now, -1
	s := pebble.MustStart(t, &o)
	profiles := make([]partmap.Profile, 1200)
	for i := range profiles {
		profiles[i] = partmap.Profile{partmap.FieldEmail: fmt.Sprintf("s%04d@example.com", i), "n": fmt.Sprint(i), "t": fmt.Sprintf("t%04d", i), "k": "kept"}
	}
	storetest.MustUpsert(t, s, profiles)
	def := partmap.IndexDefinition{Name: "sorted", Fields: []partmap.IndexField{
		{Name: "n", Type: partmap.IndexNumeric, Sortable: true}, {Name: "t", Type: partmap.IndexTag, Sortable: true}}}
	if err := s.CreateIndex(ctx, def); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: "*"}); partmap.ErrorCode(err) != partmap.EUNAVAILABLE {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The first profile in either order loses its sort fields.
	for _, e := range []string{"s0000@example.com", "s1199@example.com"} {
		if _, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"n", "t"}, When: partmap.When{Millis: storetest.T0 + 1}}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(storetest.T0 + 1)
	for _, tc := range []struct {
		sortBy string
		desc   bool
		first  string
	}{{"n", false, "s0001@example.com"}, {"n", true, "s1198@example.com"}, {"t", false, "s0001@example.com"}, {"t", true, "s1198@example.com"}} {
		res, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: "*", SortBy: tc.sortBy, Descending: tc.desc, Limit: 1, NoContent: true})
		if err != nil || res.Total != 1200 || len(res.Hits) != 1 || res.Hits[0].Email != tc.first {
			t.Errorf("SORTBY %s desc=%v: %+v %v; want %s first", tc.sortBy, tc.desc, res, err, tc.first)
		}
		res, err = s.Search(ctx, def.Name, partmap.SearchOptions{Query: "*", SortBy: tc.sortBy, Descending: tc.desc, Offset: 1198, Limit: 2, NoContent: true})
		if err != nil || len(res.Hits) != 2 || res.Hits[0].Email != "s0000@example.com" || res.Hits[1].Email != "s1199@example.com" {
			t.Errorf("SORTBY %s desc=%v, the last two: %+v %v; want the two without the field, by email", tc.sortBy, tc.desc, res, err)
		}
	}
}

// An exclusive infinite bound leaves the infinity out, as search.Match
// does: a value may be -inf or inf.
func TestSearchRangeExcludesInfiniteBounds(t *testing.T) {
	ctx := context.Background()
	o := pebble.Options{}
	o.Partitions = 16
	s := pebble.MustStart(t, &o)
	for i, n := range []string{"-inf", "-5", "5", "+inf"} {
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("n%d@example.com", i), "n": n}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateIndex(ctx, partmap.IndexDefinition{Name: "n", Fields: []partmap.IndexField{{Name: "n", Type: partmap.IndexNumeric}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    string
		want int64
	}{
		{"@n:[-inf +inf]", 4}, {"@n:[(-inf (+inf]", 2}, {"@n:[(-inf -1]", 1}, {"@n:[1 (inf]", 1},
		{"@n:[-inf -1]", 2}, {"@n:[1 inf]", 2}, {"@n:[-inf]", 1}, {"@n:[(-inf -inf]", 0}, {"@n:[(+inf +inf]", 0},
	} {
		var res partmap.SearchResult
		var err error
		for res, err = s.Search(ctx, "n", partmap.SearchOptions{Query: tc.q, NoContent: true}); partmap.ErrorCode(err) == partmap.EUNAVAILABLE; {
			time.Sleep(10 * time.Millisecond)
			res, err = s.Search(ctx, "n", partmap.SearchOptions{Query: tc.q, NoContent: true})
		}
		if err != nil || res.Total != tc.want || int64(len(res.Hits)) != tc.want {
			t.Errorf("%s: %+v %v; want %d", tc.q, res, err, tc.want)
		}
	}
}

// The indexes a directory keeps change under readers that reload them
// (ListIndexes, and a search of an index that builds) and under writers:
// a reload that read the metadata before a change must not install its
// indexes after the change's own, or writes commit without the entries of
// an index that exists, or with those of one dropped and being cleaned
// (left, then, in the slots the next index takes).
func TestSearchIndexesReloadedNeverGoBack(t *testing.T) {
	ctx := context.Background()
	o := pebble.Options{}
	o.Partitions = 16
	s := pebble.MustStart(t, &o)
	def := partmap.IndexDefinition{Name: "x", Fields: []partmap.IndexField{{Name: "a", Type: partmap.IndexTag}}}
	stopReaders := storetest.UntilStopped(2, func(w, i int) bool {
		if w == 0 {
			s.ListIndexes(ctx)
		} else {
			s.Search(ctx, def.Name, partmap.SearchOptions{Query: "*", Limit: -1})
		}
		return true
	})
	defer stopReaders()
	stopWriters := storetest.UntilStopped(2, func(w, i int) bool {
		partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("w%d-%d@x.io", w, i%20), "a": fmt.Sprint(i)}, partmap.Condition{})
		return true
	})
	defer stopWriters()
	for round := range 40 {
		if err := s.CreateIndex(ctx, def); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			_, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: "*", Limit: -1})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the index was not built in 10 s: %v", round, err)
			}
		}
		time.Sleep(5 * time.Millisecond)
		err := s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			if !c.OK() {
				return fmt.Errorf("round %d: %+v", round, c)
			}
			return nil
		})
		if err != nil && partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
			t.Fatal(err)
		}
		if err := s.DropIndex(ctx, def.Name); err != nil {
			t.Fatal(err)
		}
	}
}
