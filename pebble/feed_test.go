package pebble_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

func feedOptions(o storetest.FeedOptions) *pebble.Options {
	opts := pebble.Options{}
	opts.Partitions, opts.FeedRetention, opts.Clock = o.Partitions, o.Retention, o.Clock
	return &opts
}

func TestFeed(t *testing.T) {
	var dirs sync.Map // *pebble.Store → its data directory
	storetest.RunFeed(t, func(t *testing.T, o storetest.FeedOptions) (storetest.FeedStore, func(context.Context) error) {
		s, dir := pebble.MustOpen(t, feedOptions(o))
		dirs.Store(s, dir)
		return s, func(ctx context.Context) error { _, err := s.TrimFeed(ctx); return err }
	}, func(t *testing.T, old storetest.FeedStore, o storetest.FeedOptions) storetest.FeedStore {
		dir, _ := dirs.Load(old)
		if err := old.(*pebble.Store).Close(); err != nil {
			t.Fatal(err)
		}
		s := pebble.MustReopen(t, dir.(string), feedOptions(o))
		dirs.Store(s, dir)
		return s
	}, storetest.FeedTraits{})
}

func TestDeleteAll(t *testing.T) {
	storetest.RunDeleteAll(t, func(t *testing.T) storetest.EmptierStore {
		s, _ := pebble.MustOpen(t, nil)
		return s
	})
}

// A backup taken while writers run holds every change up to its feed
// cursor: the restored directory, with the live feed after that cursor
// replayed on top, is exactly the live directory.
func TestBackupFeedCursor(t *testing.T) {
	ctx := context.Background()
	s := pebble.MustStart(t, nil)
	var writes atomic.Int64
	stop := storetest.UntilStopped(8, func(w, i int) bool {
		email := fmt.Sprintf("b%d-%d@example.com", w, i%20)
		var err error
		if i%7 == 6 {
			err = partmap.DeleteProfile(ctx, s, email, partmap.Condition{})
		} else {
			_, _, err = partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "n": strconv.Itoa(i)}, partmap.Condition{})
		}
		if err != nil && !errors.Is(err, partmap.ErrNotFound) && !errors.Is(err, partmap.ErrLockConflict) {
			t.Error(err)
			return false
		}
		writes.Add(1)
		return true
	})
	for writes.Load() < 500 {
		time.Sleep(time.Millisecond)
	}
	var archive bytes.Buffer
	info, err := s.Backup(ctx, &archive)
	if err != nil {
		t.Fatal(err)
	}
	atBackup := writes.Load()
	for writes.Load() < atBackup+30 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if info.Feed == "" {
		t.Fatal("the backup names no feed cursor")
	}
	dir := t.TempDir()
	if _, err := pebble.Unpack(&archive, filepath.Join(dir, "backup"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pebble.Restore(ctx, pebble.BackupDir(filepath.Join(dir, "backup")), filepath.Join(dir, "data"), nil); err != nil {
		t.Fatal(err)
	}
	restored := pebble.MustReopen(t, filepath.Join(dir, "data"), nil)
	state, err := storetest.StoreState(ctx, restored)
	if err != nil {
		t.Fatal(err)
	}
	var after []partmap.Change
	for q := (partmap.ChangeQuery{After: info.Feed}); ; {
		page, err := s.Changes(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) == 0 {
			break
		}
		after, q.After = append(after, page.Changes...), page.Next
	}
	if len(after) == 0 {
		t.Fatal("no change after the backup's cursor: a poor test")
	}
	storetest.ReplayOnto(state, after)
	live, err := storetest.StoreState(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if d := storetest.DiffStates(state, live); d != "" {
		t.Fatalf("the backup with the %d changes after its cursor %s is not the live directory: %s", len(after), info.Feed, d)
	}
}
