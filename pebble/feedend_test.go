package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// A commit acknowledged while an earlier-numbered one's fsync still runs is
// past the horizon: a read then finds nothing, but is not the end of the
// feed, and Changes, even with no wait, polls on until the horizon passes
// it, for a second at most; only then is an empty page not caught up.
func TestFeedEndWaitsForTheHorizon(t *testing.T) {
	ctx := context.Background()
	s := MustStart(t, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Partitions: 16}})
	f := s.backend.feed
	stuck, _, _ := f.take([]engine.Write{{Change: partmap.OpPut}}) // numbered first, its fsync not finished
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "acked@example.com"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	page, err := s.Changes(ctx, partmap.ChangeQuery{})
	if err != nil || len(page.Changes) != 0 || page.CaughtUp {
		t.Fatalf("with an acknowledged change past the horizon: %d changes, caught up %v, %v; want none, not caught up", len(page.Changes), page.CaughtUp, err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.settle(stuck, false) // that commit failed: the horizon moves on
	}()
	page, err = s.Changes(ctx, partmap.ChangeQuery{After: page.Next})
	if err != nil || len(page.Changes) != 1 || page.Changes[0].Email != "acked@example.com" || !page.CaughtUp {
		t.Fatalf("once the horizon passed it: %+v, %v; want the change, caught up", page, err)
	}
}
