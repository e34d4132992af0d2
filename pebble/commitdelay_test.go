package pebble

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

func openWithCommitDelay(t *testing.T, delay time.Duration, siblings int) *Store {
	t.Helper()
	opts := Options{}
	opts.CommitDelay, opts.CommitSiblings = delay, siblings
	opts.LockWait = time.Minute // the writers below must not conflict out
	return MustStart(t, &opts)
}

// A lone writer never waits for companions, however long the delay: its
// commits get fsyncs of their own at once.
func TestCommitDelaySparesALoneWriter(t *testing.T) {
	s := openWithCommitDelay(t, time.Second, 4)
	syncs0 := walSyncs(s.db.Metrics())
	const writes = 30
	for i := range writes {
		p := partmap.Profile{"emailAddress": fmt.Sprintf("lone%d@example.com", i)}
		if _, _, err := partmap.UpsertProfile(context.Background(), s, p, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := s.backend.delayed.Load(); d != 0 {
		t.Fatalf("%d fsyncs were held back for a lone writer", d)
	}
	// About one fsync each; Pebble may fold a write's sync into one it
	// was already running (a WAL rotation's, say), so not exactly.
	if n := walSyncs(s.db.Metrics()) - syncs0; n < writes*3/4 {
		t.Fatalf("%d sequential writes, only %d fsyncs", writes, n)
	}
}

// Many writers in flight share fsyncs: the delay holds a sync back until
// more commits have joined it.
func TestCommitDelayGroupsManyWriters(t *testing.T) {
	s := openWithCommitDelay(t, 2*time.Millisecond, 4)
	syncs0 := walSyncs(s.db.Metrics())
	const writers, each = 64, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				p := partmap.Profile{"emailAddress": fmt.Sprintf("w%d-%d@example.com", w, i)}
				if _, _, err := partmap.UpsertProfile(context.Background(), s, p, partmap.Condition{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	syncs := walSyncs(s.db.Metrics()) - syncs0
	if s.backend.delayed.Load() == 0 {
		t.Fatal("no fsync was held back with 64 writers in flight")
	}
	if syncs*4 > writers*each {
		t.Fatalf("%d writes took %d fsyncs; held-back syncs should serve several each", writers*each, syncs)
	}
	t.Logf("%d writes, %d fsyncs, %d held back", writers*each, syncs, s.backend.delayed.Load())
}
