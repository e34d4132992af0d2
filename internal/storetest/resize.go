package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
)

// WaitResized polls until no resize runs, and returns the final status.
func WaitResized(t testing.TB, s partmap.Store) partmap.ResizeStatus {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := s.ResizeStatus(context.Background())
		if err != nil {
			t.Fatalf("resize status: %v", err)
		}
		if !st.Running {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resize did not finish: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HoldMidResize starts resizes of s, to 1500 partitions and then more,
// until one still runs once the whole-map lock is taken, which holds it
// midway; it returns that resize's status and the lock, for the caller
// to release.
func HoldMidResize(t testing.TB, s partmap.Store) (partmap.ResizeStatus, partmap.WholeMapLock) {
	t.Helper()
	ctx := context.Background()
	for n := 1500; n <= 6500; n += 500 {
		if _, err := s.Resize(ctx, n); err != nil {
			t.Fatal(err)
		}
		lock, err := s.LockWholeMap(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.ResizeStatus(ctx)
		if err == nil && st.Running {
			return st, lock
		}
		if err := s.UnlockWholeMap(ctx, lock.Lease); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("every resize ended before the whole-map lock was taken")
	return partmap.ResizeStatus{}, partmap.WholeMapLock{}
}

// CheckAll checks every partition of the current layout.
func CheckAll(t testing.TB, s partmap.Store) {
	t.Helper()
	ctx := context.Background()
	checked := 0
	check := func() error {
		checked = 0
		return s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			if !c.OK() {
				return fmt.Errorf("check of %s: %+v", c.Partition, c)
			}
			checked++
			return nil
		})
	}
	err := check()
	// A fail-fast store may still be releasing a resize's locks.
	for try := 0; errors.Is(err, partmap.ErrLockConflict) && try < 100; try++ {
		time.Sleep(20 * time.Millisecond)
		err = check()
	}
	stats, serr := s.ListPartitions(ctx)
	if err != nil || serr != nil || checked != stats.TotalPartitions {
		t.Fatalf("checked %d of %d partitions: %v %v", checked, stats.TotalPartitions, err, serr)
	}
}

// RunResize checks online resizing on a store that supports it.
func RunResize(t *testing.T, open Opener) {
	ctx := context.Background()
	started := startedBy(open)
	load := func(t *testing.T, s partmap.Store, n int) map[string]partmap.Record {
		profiles := make([]partmap.Profile, n)
		for i := range profiles {
			profiles[i] = partmap.Profile{partmap.FieldEmail: fmt.Sprintf("r%05d@example.com", i),
				"companyName": fmt.Sprint("Co", i%7), "customerTier": []string{"gold", "silver"}[i%2]}
		}
		want := map[string]partmap.Record{}
		for len(profiles) > 0 {
			batch := profiles[:min(len(profiles), 5000)]
			profiles = profiles[len(batch):]
			for _, r := range MustUpsert(t, s, batch) {
				want[r.Record.Profile.Email()] = r.Record
			}
		}
		return want
	}
	// same checks that want's profiles are listed, and with exact, that
	// nothing else is.
	same := func(t *testing.T, s partmap.Store, want map[string]partmap.Record, exact bool) {
		t.Helper()
		got := listAll(t, s, 1000)
		if exact && len(got) != len(want) {
			t.Fatalf("listed %d profiles, want %d", len(got), len(want))
		}
		found := 0
		for _, rec := range got {
			w, ok := want[rec.Profile.Email()]
			if ok {
				found++
			}
			if (exact && !ok) || (ok && !maps.Equal(w.Profile, rec.Profile)) {
				t.Fatalf("listed %v, want %v", rec.Profile, w.Profile)
			}
		}
		if found != len(want) {
			t.Fatalf("listed %d of the %d profiles", found, len(want))
		}
		for _, e := range slices.Sorted(maps.Keys(want))[:20] {
			rec, err := s.FindProfile(ctx, e)
			if err != nil || (want[e].Version != 0 && rec.Version != want[e].Version) {
				t.Fatalf("find %s: %v version %x, want version %x (versions, hence ETags, survive a resize)", e, err, rec.Version, want[e].Version)
			}
		}
	}

	t.Run("SearchAcrossResize", func(t *testing.T) { runSearchAcrossResize(t, started) })

	t.Run("ResizeRefusesBadCounts", func(t *testing.T) {
		s := started(t)
		for _, n := range []int{0, -1, partmap.MaxPartitions + 1, partmap.DefaultPartitions} {
			if _, err := s.Resize(ctx, n); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("resize to %d: got %v, want invalid", n, err)
			}
		}
		if st, err := s.ResizeStatus(ctx); err != nil || st.Running || st.Partitions != partmap.DefaultPartitions {
			t.Fatalf("status: %+v %v", st, err)
		}
	})

	// A resize to another count while one runs is a conflict with the
	// directory's state, not a bad request; the same count resumes it. The
	// whole-map lock keeps the running one from finishing meanwhile.
	t.Run("ErrConflictWhileAResizeRuns", func(t *testing.T) {
		s := started(t)
		load(t, s, 200)
		st, lock := HoldMidResize(t, s)
		n := st.To
		if _, err := s.Resize(ctx, n+1); partmap.ErrorCode(err) != partmap.ECONFLICT {
			t.Errorf("resize to %d while one to %d runs: got %v, want conflict", n+1, n, err)
		}
		if _, err := s.Resize(ctx, n); err != nil {
			t.Errorf("resize to %d again while it runs: %v", n, err)
		}
		s.UnlockWholeMap(ctx, lock.Lease)
		WaitResized(t, s)
	})

	// The mover's failures, which it retries, are its status while it
	// runs; once the status says the resize is over, none of them shows.
	// (The layout went live before the last error was cleared, a release
	// of every lock earlier on Redis: a status read in between said
	// "done" with an old lock conflict as its LastError.)
	t.Run("NoLastErrorOnceResized", func(t *testing.T) {
		s := started(t)
		load(t, s, 200)
		st, lock := HoldMidResize(t, s)
		n := st.To
		var err error
		// The mover meets the lock, and says so.
		for deadline := time.Now().Add(time.Minute); st.LastError == ""; {
			if time.Now().After(deadline) {
				t.Fatalf("the mover met no lock conflict under the whole-map lock: %+v", st)
			}
			time.Sleep(5 * time.Millisecond)
			if st, err = s.ResizeStatus(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s.UnlockWholeMap(ctx, lock.Lease)
		for deadline := time.Now().Add(2 * time.Minute); st.Running; {
			if time.Now().After(deadline) {
				t.Fatalf("the resize did not finish: %+v", st)
			}
			if st, err = s.ResizeStatus(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if st.Partitions != n || st.LastError != "" {
			t.Fatalf("the first status after the resize: %+v, want %d partitions and no error", st, n)
		}
	})

	t.Run("ResizeKeepsEverything", func(t *testing.T) {
		s := started(t)
		want := load(t, s, 1500)
		// Down to a few partitions, then up past them: every profile
		// moves twice.
		for _, n := range []int{7, 300} {
			page, _ := s.ListProfiles(ctx, partmap.ListOptions{Limit: 10})
			st, err := s.Resize(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if st.Partitions == n && st.Running {
				t.Fatalf("status right after starting: %+v", st)
			}
			st = WaitResized(t, s)
			if st.Partitions != n || st.LastError != "" {
				t.Fatalf("after the resize: %+v", st)
			}
			same(t, s, want, true)
			stats, err := s.ListPartitions(ctx)
			if err != nil || stats.TotalPartitions != n || stats.TotalProfiles != int64(len(want)) {
				t.Fatalf("partitions after resizing to %d: %d partitions, %d profiles, %v", n, stats.TotalPartitions, stats.TotalProfiles, err)
			}
			CheckAll(t, s)
			// Searches answer from the new layout.
			gold := listWhere(t, s, 100, []partmap.Match{{Field: "customerTier", Value: "gold"}, {Field: "companyName", Value: "Co3"}}, true)
			if len(gold) != len(want)/14 && len(gold) != len(want)/14+1 {
				t.Fatalf("search after the resize found %d", len(gold))
			}
			// A cursor from before the resize is refused, not misread.
			if _, err := s.ListProfiles(ctx, partmap.ListOptions{Cursor: page.NextCursor, Limit: 10}); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Fatalf("a cursor from before the resize: %v", err)
			}
		}
		// Writes after the resize land in the new layout.
		e := "r00001@example.com"
		if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"customerTier": ptr("platinum")}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if got := listWhere(t, s, 10, []partmap.Match{{Field: "customerTier", Value: "platinum"}}, true); len(got) != 1 {
			t.Fatalf("search for a write after the resize: %v", got)
		}
		CheckAll(t, s)
	})

	// Clients keep reading and writing while the directory resizes; their
	// history must be linearizable, and nothing may be lost.
	t.Run("ResizeUnderLoadIsLinearizable", func(t *testing.T) {
		s := started(t)
		want := load(t, s, 1000)
		var done atomic.Bool
		historyDone := make(chan []porcupine.Operation)
		go func() {
			historyDone <- RecordHistory(t, func(int) partmap.Store { return s },
				LinearizabilityOptions{Clients: 8, OpsPerClient: 60, Emails: 6, Until: done.Load})
		}()
		if _, err := s.Resize(ctx, 333); err != nil {
			t.Fatal(err)
		}
		st := WaitResized(t, s)
		done.Store(true)
		history := <-historyDone
		if st.Partitions != 333 {
			t.Fatalf("after the resize: %+v", st)
		}
		if res := CheckHistory(t, history); res != porcupine.Ok {
			t.Fatalf("history across a resize: %v", res)
		}
		same(t, s, want, false)
		CheckAll(t, s)
	})

	t.Run("ResizeDuringWrites", func(t *testing.T) {
		// Every write acknowledged during the move is there afterwards.
		s := started(t)
		load(t, s, 1000)
		var stop atomic.Bool
		acked := make(chan map[string]string)
		go func() {
			last := map[string]string{}
			for i := 0; !stop.Load() || i < 200; i++ {
				e := fmt.Sprintf("w%03d@example.com", i%150)
				v := fmt.Sprint(i)
				_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": v, "companyName": v}, partmap.Condition{})
				if err == nil {
					last[e] = v
				} else if !errors.Is(err, partmap.ErrLockConflict) {
					t.Errorf("write during the resize: %v", err)
					break
				}
			}
			acked <- last
		}()
		if _, err := s.Resize(ctx, 64); err != nil {
			t.Fatal(err)
		}
		WaitResized(t, s)
		stop.Store(true)
		for e, v := range <-acked {
			rec, err := s.FindProfile(ctx, e)
			if err != nil || rec.Profile["n"] != v {
				t.Fatalf("%s after the resize: %v %v, want n=%s", e, rec.Profile, err, v)
			}
			if got := listWhere(t, s, 10, []partmap.Match{{Field: "companyName", Value: v}}, true); len(got) != 1 {
				t.Fatalf("search companyName=%s after the resize: %v", v, got)
			}
		}
		CheckAll(t, s)
	})
}
