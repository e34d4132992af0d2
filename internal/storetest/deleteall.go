package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// EmptierStore is a store that publishes its changes and can delete every
// profile at once.
type EmptierStore interface {
	FeedStore
	partmap.Emptier
}

// RunDeleteAll checks DeleteAllProfiles (partmap.Emptier) on stores that
// open returns, new and empty, with the default partition count: it
// deletes every profile, however many share a partition, with one event
// each in the change feed, under the whole-map lock, during a resize too.
func RunDeleteAll(t *testing.T, open func(t *testing.T) EmptierStore) {
	ctx := context.Background()
	started := func(t *testing.T) EmptierStore {
		s := open(t)
		if _, err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	empty := func(t *testing.T, s EmptierStore) {
		t.Helper()
		if got := listAll(t, s, partmap.MaxPageLimit); len(got) != 0 {
			t.Fatalf("%d profiles listed after DeleteAllProfiles, %s first", len(got), got[0].Profile.Email())
		}
		st, err := s.ListPartitions(ctx)
		if err != nil || st.TotalProfiles != 0 || len(st.Partitions) != 0 {
			t.Fatalf("partitions after DeleteAllProfiles: %+v %v, want none", st, err)
		}
		CheckAll(t, s)
	}

	t.Run("DeletesEveryProfile", func(t *testing.T) {
		s := started(t)
		mark := feedNow(t, s)
		// More than a page of deletions in one partition, and others
		// spread over the map, indexed fields and deadlines among them.
		crowd, _ := Colliding(1001, partmap.DefaultPartitions, "crowd")
		var profiles []partmap.Profile
		for i, e := range append(crowd, Spread(200, "spread")...) {
			profiles = append(profiles, partmap.Profile{partmap.FieldEmail: e, "companyName": fmt.Sprint("Co", i%3), "n": fmt.Sprint(i)})
		}
		MustUpsert(t, s, profiles)
		expireFields(t, s, crowd[0], at(4_000_000_000_000), "", "n")
		// An expired profile the sweeper may not have reclaimed yet.
		res, err := s.UpsertRecords(ctx, []partmap.Record{{Profile: partmap.Profile{partmap.FieldEmail: "gone@example.com"},
			Deadlines: partmap.Deadlines{Profile: time.Now().Add(-time.Hour).UnixMilli()}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("upsert of an expired profile: %+v %v", res, err)
		}
		n, err := s.DeleteAllProfiles(ctx)
		if err != nil || n != int64(len(profiles)) {
			t.Fatalf("DeleteAllProfiles: %d, %v; want %d", n, err, len(profiles))
		}
		empty(t, s)
		// One event per profile, the last of each: a deletion.
		deletes := map[string]int{}
		last := map[string]partmap.Change{}
		for _, c := range feedAll(t, s, partmap.ChangeQuery{After: mark}) {
			last[c.Email] = c
			if c.Deleted() {
				deletes[c.Email]++
			}
		}
		for _, p := range profiles {
			e := p.Email()
			if c := last[e]; c.Op != partmap.OpDelete || !c.Deleted() || deletes[e] != 1 {
				t.Fatalf("%s: last event %+v after %d deletions; want one delete", e, c, deletes[e])
			}
		}
		if c := last["gone@example.com"]; c.Op != partmap.OpExpired || !c.Deleted() || deletes["gone@example.com"] != 1 {
			t.Fatalf("the expired profile: last event %+v after %d deletions; want one expired", c, deletes["gone@example.com"])
		}
		if len(last) != len(profiles)+1 {
			t.Fatalf("the feed names %d profiles, want %d", len(last), len(profiles)+1)
		}
		// The whole-map lock is released: writes go on.
		put(t, s, crowd[1], "back")
		if n, err := s.DeleteAllProfiles(ctx); err != nil || n != 1 {
			t.Fatalf("DeleteAllProfiles of one profile: %d, %v", n, err)
		}
		mustBeGone(t, s, crowd[1])
		if n, err := s.DeleteAllProfiles(ctx); err != nil || n != 0 {
			t.Fatalf("DeleteAllProfiles of none: %d, %v", n, err)
		}
	})

	t.Run("ErrWholeMapLocked", func(t *testing.T) {
		s := started(t)
		put(t, s, "kept@example.com", "Kept")
		lock, err := s.LockWholeMap(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		_, err = s.DeleteAllProfiles(ctx)
		if partmap.ErrorCode(err) != partmap.ELOCKCONFLICT || time.Since(began) > 5*time.Second {
			t.Fatalf("DeleteAllProfiles under an operator's whole-map lock: %v after %v; want a lock conflict at once", err, time.Since(began))
		}
		if err := s.UnlockWholeMap(ctx, lock.Lease); err != nil {
			t.Fatal(err)
		}
		mustFind(t, s, "kept@example.com")
	})

	// During a resize every deletion goes to both generations: once the
	// resize is over the directory is still empty.
	t.Run("MidResize", func(t *testing.T) {
		s := started(t)
		var profiles []partmap.Profile
		for i := range 1200 {
			profiles = append(profiles, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("m%05d@example.com", i), "customerTier": "gold"})
		}
		MustUpsert(t, s, profiles)
		_, lock := HoldMidResize(t, s)
		if err := s.UnlockWholeMap(ctx, lock.Lease); err != nil {
			t.Fatal(err)
		}
		if n, err := s.DeleteAllProfiles(ctx); err != nil || n != int64(len(profiles)) {
			t.Fatalf("DeleteAllProfiles during a resize: %d, %v; want %d", n, err, len(profiles))
		}
		WaitResized(t, s)
		empty(t, s)
		put(t, s, profiles[7].Email(), "after")
		if got := listAll(t, s, 10); len(got) != 1 {
			t.Fatalf("after a write: %d profiles listed, want 1", len(got))
		}
	})
}
