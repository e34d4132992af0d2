package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/redis"
)

// An export holds the whole-map lock for as long as it runs, well past the
// locks' TTL, and other servers' writers meet lock conflicts meanwhile.
func TestExportOutlivesLockTTL(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, LockTTL: 300 * time.Millisecond})
	a.Start(ctx)
	for i := range 20 {
		if _, _, err := partmap.UpsertProfile(ctx, a, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i)}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	var conflicts int
	n := 0
	err := a.ExportProfiles(ctx, func(partmap.Record) error {
		n++
		time.Sleep(50 * time.Millisecond) // 20 profiles: over three TTLs in all
		_, _, err := partmap.UpsertProfile(ctx, b, partmap.Profile{partmap.FieldEmail: "writer@example.com"}, partmap.Condition{})
		if errors.Is(err, partmap.ErrLockConflict) {
			conflicts++
		} else {
			t.Errorf("a write during the export: got %v, want a lock conflict", err)
		}
		return nil
	})
	if err != nil || n != 20 || conflicts != 20 {
		t.Fatalf("export: %v after %d profiles, %d conflicts", err, n, conflicts)
	}
	if _, _, err := partmap.UpsertProfile(ctx, b, partmap.Profile{partmap.FieldEmail: "writer@example.com"}, partmap.Condition{}); err != nil {
		t.Fatalf("a write after the export: %v", err)
	}
}

// An export whose locks vanish (here deleted, as a failover to a replica
// that never saw them would) fails instead of passing off a moving view.
func TestExportFailsWhenItLosesTheLock(t *testing.T) {
	ctx := context.Background()
	a := open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, LockTTL: 150 * time.Millisecond})
	a.Start(ctx)
	for i := range 10 {
		if _, _, err := partmap.UpsertProfile(ctx, a, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i)}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	c := rawClient()
	defer c.Close()
	err := a.ExportProfiles(ctx, func(partmap.Record) error {
		keys, err := c.Keys(ctx, "*:lock").Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		time.Sleep(60 * time.Millisecond) // past the next renewal
		return nil
	})
	if partmap.ErrorCode(err) != partmap.EUNAVAILABLE {
		t.Fatalf("export after losing its locks: got %v, want unavailable", err)
	}
}
