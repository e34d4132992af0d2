package pebble

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
)

// countedGets records every read the directory asks of the real backend,
// each partition of a view (GetView) as one.
type countedGets struct {
	*backend
	mu    sync.Mutex
	reads []countedRead
}

type countedRead struct {
	part   engine.Part
	emails []string
}

func (c *countedGets) Get(ctx context.Context, part engine.Part, emails []string) ([]*partmap.Record, error) {
	c.mu.Lock()
	c.reads = append(c.reads, countedRead{part, slices.Clone(emails)})
	c.mu.Unlock()
	return c.backend.Get(ctx, part, emails)
}

// GetView counts each partition of a batch read at one instant as one read.
func (c *countedGets) GetView(ctx context.Context, gen int, reads []engine.Read) ([][]*partmap.Record, error) {
	c.mu.Lock()
	for _, r := range reads {
		c.reads = append(c.reads, countedRead{engine.Part{Generation: gen, Partition: r.Partition}, slices.Clone(r.Emails)})
	}
	c.mu.Unlock()
	return c.backend.GetView(ctx, gen, reads)
}

// take returns the reads since the last take.
func (c *countedGets) take() []countedRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = nil
	return r
}

// A batch lookup reads each partition once, with one backend read of the
// distinct emails asked for in it, and only in the generation that serves
// reads: before a resize, while one is held midway, and after it.
func TestBatchReadsEachPartitionOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, nil)
	counted := &countedGets{backend: &backend{db: s.db, feed: s.backend.feed, present: s.backend.present}}
	// Only this directory serves the database from here on; s's stays idle.
	d, err := directory.Open(ctx, counted, directory.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, SweepInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var existing []partmap.Profile
	for i := range 300 {
		existing = append(existing, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("once%d@example.com", i)})
	}
	same, _ := storetest.Colliding(5, partmap.DefaultPartitions, "crowd")
	for _, e := range same[:3] {
		existing = append(existing, partmap.Profile{partmap.FieldEmail: e})
	}
	if _, err := d.UpsertProfiles(ctx, existing); err != nil {
		t.Fatal(err)
	}
	// A thousand emails: those that exist, some of them twice and in
	// another spelling, others that do not, some in crowded partitions.
	var ask []string
	for _, p := range existing {
		ask = append(ask, p.Email())
	}
	ask = append(ask, same[3:]...)
	for i := 0; len(ask) < partmap.MaxBatchEmails; i++ {
		if i%3 == 0 {
			ask = append(ask, strings.ToUpper(existing[i%len(existing)].Email()))
		} else {
			ask = append(ask, fmt.Sprintf("absent%d@example.com", i))
		}
	}

	check := func(t *testing.T, gen, partitions int) {
		t.Helper()
		counted.take()
		recs, err := d.FindProfiles(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs {
			exists := !strings.HasPrefix(ask[i], "absent") && !slices.Contains(same[3:], ask[i])
			if exists != (rec != nil) || (rec != nil && rec.Profile.Email() != strings.ToLower(ask[i])) {
				t.Fatalf("answer %d (%s): %v", i, ask[i], rec)
			}
		}
		want := map[engine.Part][]string{} // the distinct emails of each partition
		for _, e := range ask {
			e = strings.ToLower(e)
			p := engine.Part{Generation: gen, Partition: partmap.PartitionOf(e, partitions)}
			if !slices.Contains(want[p], e) {
				want[p] = append(want[p], e)
			}
		}
		reads := counted.take()
		if len(reads) != len(want) {
			t.Fatalf("%d backend reads for %d emails in %d partitions of generation %d; want one per partition", len(reads), len(ask), len(want), gen)
		}
		seen := map[engine.Part]bool{}
		for _, r := range reads {
			w, ok := want[r.part]
			switch {
			case !ok:
				t.Fatalf("read %v, which no email asked for is in (generation %d serves reads)", r.part, gen)
			case seen[r.part]:
				t.Fatalf("read %v twice", r.part)
			case !slices.Equal(slices.Sorted(slices.Values(r.emails)), slices.Sorted(slices.Values(w))):
				t.Fatalf("read %v for %q, want its emails %q, each once", r.part, r.emails, w)
			}
			seen[r.part] = true
		}
	}

	t.Run("Before", func(t *testing.T) { check(t, 0, partmap.DefaultPartitions) })

	// The whole-map lock holds a resize midway: it has a next generation,
	// which receives every write, but reads stay on the current one. A
	// resize that ended before the lock was taken is tried again, to
	// another count.
	during, held := storetest.HoldMidResize(t, d)
	t.Run("During", func(t *testing.T) { check(t, during.Generation, during.Partitions) })
	if err := d.UnlockWholeMap(ctx, held.Lease); err != nil {
		t.Fatal(err)
	}
	st := storetest.WaitResized(t, d)
	if st.Generation == 0 {
		t.Fatalf("after the resize: %+v", st)
	}
	t.Run("After", func(t *testing.T) { check(t, st.Generation, st.Partitions) })
}
