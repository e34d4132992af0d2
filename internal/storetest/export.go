package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

func exportAll(t *testing.T, s partmap.Store) []partmap.Record {
	t.Helper()
	var out []partmap.Record
	if err := s.ExportProfiles(context.Background(), func(rec partmap.Record) error {
		out = append(out, rec)
		return nil
	}); err != nil {
		t.Fatalf("export: %v", err)
	}
	return out
}

func runExport(t *testing.T, open Opener, started func(*testing.T) partmap.Store) {
	ctx := context.Background()

	t.Run("ExportBeforeStart", func(t *testing.T) {
		s := open(t)
		err := s.ExportProfiles(ctx, func(partmap.Record) error { return nil })
		if !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("export before start: got %v, want not-started", err)
		}
	})

	t.Run("ExportMatchesEnumeration", func(t *testing.T) {
		s := started(t)
		if got := exportAll(t, s); len(got) != 0 {
			t.Fatalf("empty directory exported %d profiles", len(got))
		}
		profiles := []partmap.Profile{
			{partmap.FieldEmail: "zoe@example.com", "fullName": "Zoë \"Z\" Ångström", "note": "tab\there, newline\nthere, emoji 🦀"},
			{partmap.FieldEmail: "empty@example.com", "blank": ""},
			{partmap.FieldEmail: "bob@example.com", "companyName": "Acme", "customerTier": "gold"},
		}
		emails, _ := Colliding(5, partmap.DefaultPartitions, "same")
		for _, e := range emails {
			profiles = append(profiles, partmap.Profile{partmap.FieldEmail: e, "n": e})
		}
		for _, p := range profiles {
			if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		got := exportAll(t, s)
		want := listAll(t, s, 3)
		if len(got) != len(profiles) || len(want) != len(profiles) {
			t.Fatalf("exported %d, listed %d, stored %d", len(got), len(want), len(profiles))
		}
		for i := range got {
			if got[i].Version != 0 {
				t.Errorf("export record %d carries version %d", i, got[i].Version)
			}
			if !reflect.DeepEqual(got[i].Profile, want[i].Profile) {
				t.Fatalf("export #%d = %v, enumeration has %v", i, got[i].Profile, want[i].Profile)
			}
		}
	})

	t.Run("ExportStopsOnCallbackError", func(t *testing.T) {
		s := started(t)
		for i := range 50 {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("stop%d@example.com", i)}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		stop := errors.New("enough")
		calls := 0
		err := s.ExportProfiles(ctx, func(partmap.Record) error {
			calls++
			if calls == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != 3 {
			t.Fatalf("got %v after %d calls, want the callback's error after 3", err, calls)
		}
		// Whatever the export held (a snapshot, locks) is released.
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "stop0@example.com", "after": "yes"}, partmap.Condition{}); err != nil {
			t.Fatalf("write after a stopped export: %v", err)
		}
	})

	// One writer writes seq = 0, 1, 2, ... in turn to keys[seq % n], each
	// write after the previous one succeeded, while an export runs slowly.
	// A snapshot taken at one instant that shows write S shows, for every
	// key, exactly the last write to it numbered S or less.
	t.Run("ExportIsASnapshot", func(t *testing.T) {
		s := started(t)
		// Enough keys that a backend reading the snapshot in pages needs
		// several: one page is trivially consistent.
		const n = 2500
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("snap%04d@example.com", i)
		}
		var seq atomic.Int64
		write := func(ctx context.Context, i int64) error {
			for {
				_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: keys[i%n], "seq": strconv.FormatInt(i, 10)}, partmap.Condition{})
				if err == nil || ctx.Err() != nil {
					return err
				}
				if !errors.Is(err, partmap.ErrLockConflict) {
					return err
				}
			}
		}
		initial := make([]partmap.Profile, n)
		for i := range initial {
			initial[i] = partmap.Profile{partmap.FieldEmail: keys[i], "seq": strconv.Itoa(i)}
		}
		MustUpsert(t, s, initial)
		seq.Store(n)
		wctx, stopWriter := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var writeErr error
		wg.Go(func() {
			for i := int64(n); wctx.Err() == nil; i++ {
				if err := write(wctx, i); err != nil {
					if wctx.Err() == nil {
						writeErr = err
					}
					return
				}
				seq.Store(i + 1)
			}
		})
		// Let the writer get going, then export slowly enough that it
		// writes throughout.
		for seq.Load() < n+50 {
			time.Sleep(time.Millisecond)
		}
		before := seq.Load()
		var got []partmap.Record
		err := s.ExportProfiles(ctx, func(rec partmap.Record) error {
			if got = append(got, rec); len(got)%20 == 0 {
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		stopWriter()
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if writeErr != nil {
			t.Fatalf("writer: %v", writeErr)
		}
		after := seq.Load()
		if len(got) != n {
			t.Fatalf("exported %d profiles, want %d", len(got), n)
		}
		values := map[string]int64{}
		var maxSeq int64 = -1
		for _, rec := range got {
			v, err := strconv.ParseInt(rec.Profile["seq"], 10, 64)
			if err != nil {
				t.Fatalf("bad seq in %v", rec.Profile)
			}
			values[rec.Profile.Email()] = v
			maxSeq = max(maxSeq, v)
		}
		for i, k := range keys {
			want := maxSeq - (((maxSeq-int64(i))%n)+n)%n // the last write to key i numbered maxSeq or less
			if values[k] != want {
				t.Fatalf("not a snapshot: the export shows write %d but %s has write %d, not %d (writes during the export: %d..%d)",
					maxSeq, k, values[k], want, before, after)
			}
		}
		t.Logf("export saw write %d; the writer went from %d to %d meanwhile", maxSeq, before, after)
	})
}
