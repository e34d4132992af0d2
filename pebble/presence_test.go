package pebble

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
)

// The filter never calls a key it holds absent, is asked only once ready,
// and calls most keys it does not hold absent.
func TestPresenceFilter(t *testing.T) {
	p := newPresence(0)
	key := func(i int) []byte { return fmt.Appendf(nil, "r\x00\x00\x00\x07user%d@example.com", i) }
	if p.absentKey(key(1)) {
		t.Fatal("a filter that is not ready answered")
	}
	const n = 20000
	for i := range n {
		p.add(key(i))
	}
	p.ready.Store(true)
	for i := range n {
		if p.absentKey(key(i)) {
			t.Fatalf("key %d was added but is called absent", i)
		}
	}
	absent := 0
	for i := n; i < 2*n; i++ {
		if p.absentKey(key(i)) {
			absent++
		}
	}
	if absent < n*98/100 {
		t.Errorf("only %d of %d keys never added were called absent", absent, n)
	}
	if got := p.absent.Load(); got != int64(absent) {
		t.Errorf("the counter says %d, the answers %d", got, absent)
	}
	// Sized by the profiles stored, within its bounds.
	for _, c := range []struct{ keys, bits int64 }{{0, presenceMinBits}, {1 << 20, 1 << 24}, {1 << 40, presenceMaxBits}} {
		if got := int64(presenceBits(c.keys)); got != c.bits {
			t.Errorf("for %d profiles: %d bits, want %d", c.keys, got, c.bits)
		}
	}
}

// waitPresence waits for s's filter to be ready.
func waitPresence(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !s.backend.present.ready.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the presence filter's scan did not finish")
		}
	}
}

// A store reopened, and reopened after a resize moved every profile to a
// new generation, tells a replace from a create as it did before: the
// filter's scan found every stored record, and a new email is answered
// without Pebble.
func TestPresenceFilterAcrossReopenAndResize(t *testing.T) {
	ctx := context.Background()
	// Without the record cache, every lookup asks the filter, then Pebble.
	opts := &Options{RecordCacheBytes: -1}
	s, dir := MustOpen(t, opts)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	emails := storetest.Spread(300, "present")
	put := func(s *Store, email string) bool {
		t.Helper()
		_, created, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "companyName": "Acme"}, partmap.Condition{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	for _, e := range emails {
		if !put(s, e) {
			t.Fatalf("%s: the first put did not create it", e)
		}
	}
	check := func(s *Store, round string) {
		t.Helper()
		waitPresence(t, s)
		for _, e := range emails {
			if put(s, e) {
				t.Fatalf("%s: %s, a put of a stored profile created it", round, e)
			}
		}
		before := s.backend.present.absent.Load()
		fresh := fmt.Sprintf("new-%s@example.com", round)
		if !put(s, fresh) {
			t.Fatalf("%s: a put of a new email did not create it", round)
		}
		if s.backend.present.absent.Load() == before {
			t.Errorf("%s: the new email's lookup went to Pebble", round)
		}
		emails = append(emails, fresh)
		stats, err := s.ListPartitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stats.TotalProfiles != int64(len(emails)) {
			t.Fatalf("%s: %d profiles counted, want %d", round, stats.TotalProfiles, len(emails))
		}
	}
	check(s, "opened")
	s.Close()
	s = MustReopen(t, dir, opts)
	check(s, "reopened")
	if _, err := s.Resize(ctx, 1500); err != nil {
		t.Fatal(err)
	}
	if st := storetest.WaitResized(t, s); st.Generation == 0 {
		t.Fatalf("the resize left generation 0: %+v", st)
	}
	check(s, "resized")
	s.Close()
	s = MustReopen(t, dir, opts)
	check(s, "reopened after the resize")
}
