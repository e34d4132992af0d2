package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// editMeta applies fn to the stored metadata, as the directory does.
func editMeta(t *testing.T, fn func(m map[string]any)) {
	c := rawClient()
	defer c.Close()
	v, err := c.Get(context.Background(), "partmap::meta").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(v, &m)
	fn(m)
	nv, _ := json.Marshal(m)
	if err := c.Set(context.Background(), "partmap::meta", nv, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func retryConflict(f func() error) error {
	err := f()
	for i := 0; errors.Is(err, partmap.ErrLockConflict) && i < 200; i++ {
		time.Sleep(10 * time.Millisecond)
		err = f()
	}
	return err
}

// Server A dies between the switch's metadata update and its retired
// marks. The restarted A finishes the marks (the metadata lists the
// retired version) before it serves, so B, still on two versions, meets
// them and reloads: no increment is lost.
func TestInterruptedSwitchIsFinishedAtOpen(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: 200 * time.Millisecond}})
	a.Start(ctx)
	const victim = "victim@example.com"
	if _, _, err := partmap.UpsertProfile(ctx, a, partmap.Profile{partmap.FieldEmail: victim, "n": "0"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resize(ctx, 250); err != nil {
		t.Fatal(err)
	}
	// B learns of the resize (its first write meets a "resizing" mark).
	if err := retryConflict(func() error {
		_, _, err := partmap.UpsertProfile(ctx, b, partmap.Profile{partmap.FieldEmail: "other@example.com"}, partmap.Condition{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Freeze A's mover, then stop A: the state a crash leaves after
	// switchTo's UpdateMeta and before its Mark is then written by hand.
	var lease partmap.WholeMapLock
	if err := retryConflict(func() (err error) { lease, err = b.LockWholeMap(ctx, time.Minute); return }); err != nil {
		t.Fatal(err)
	}
	a.Close()
	editMeta(t, func(m map[string]any) {
		m["version"], m["partitions"] = 1, 250
		delete(m, "resize")
		m["retired"] = []any{map[string]any{"version": 0, "partitions": 1000}} // recorded with the switch
	})
	b.UnlockWholeMap(ctx, lease.Lease)
	// B writes the victim (to both generations, as during a resize).
	if err := retryConflict(func() error {
		_, _, err := partmap.UpsertProfile(ctx, b, partmap.Profile{partmap.FieldEmail: victim, "n": "0"}, partmap.Condition{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a2, err := redis.Open(ctx, rawClient(), &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: 200 * time.Millisecond}}) // A restarted
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if _, err := partmap.IncrementField(ctx, a2, victim, "n", 1, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	if rec, err := b.FindProfile(ctx, victim); err != nil || rec.Profile["n"] != "1" {
		t.Fatalf("B reads %v (%v) after A's acknowledged increment to 1", rec.Profile, err)
	}
	if _, err := partmap.IncrementField(ctx, b, victim, "n", 1, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	rec, _ := a2.FindProfile(ctx, victim)
	if rec.Profile["n"] != "2" {
		t.Errorf("two acknowledged increments of 0, A reads n=%s: an increment is lost", rec.Profile["n"])
	}
}

// Server A dies between the resize's metadata update and its resizing
// marks. The restarted A marks before it copies, so B, which missed the
// resize, cannot write a copied partition alone: nothing is lost at the
// switch.
func TestInterruptedStartLosesNoWrites(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: 200 * time.Millisecond}})
	a.Start(ctx)
	victim := ""
	for i := 0; victim == ""; i++ {
		if e := fmt.Sprintf("v%d@example.com", i); partmap.PartitionOf(e, 1000) == 0 {
			victim = e
		}
	}
	var ps []partmap.Profile
	for i := range 5000 {
		ps = append(ps, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i)})
	}
	ps = append(ps, partmap.Profile{partmap.FieldEmail: victim, "n": "0"})
	a.UpsertProfiles(ctx, ps)
	a.Close()
	editMeta(t, func(m map[string]any) { // Resize's UpdateMeta; the crash comes before Mark
		m["resize"] = map[string]any{"partitions": 250, "version": 1, "copied": 0}
	})
	a2, err := redis.Open(ctx, rawClient(), &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: 200 * time.Millisecond}}) // A restarted: resumes the move
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if _, _, err := partmap.UpsertProfile(ctx, a2, partmap.Profile{partmap.FieldEmail: "x@example.com"}, partmap.Condition{}); err != nil {
		t.Fatalf("a write on the restarted A during the resize: %v", err)
	}
	for {
		st, _ := a2.ResizeStatus(ctx)
		if st.Copied >= 1 || !st.Running {
			break
		}
	}
	if _, err := retryConflict2(func() (partmap.Increment, error) {
		return partmap.IncrementField(ctx, b, victim, "n", 1, partmap.Condition{})
	}); err != nil {
		t.Fatal(err)
	}
	storetest.WaitResized(t, a2)
	rec, err := a2.FindProfile(ctx, victim)
	if err != nil || rec.Profile["n"] != "1" {
		t.Errorf("after the resize, n=%q (%v); B's acknowledged increment to 1 is lost", rec.Profile["n"], err)
	}
}

func retryConflict2(f func() (partmap.Increment, error)) (partmap.Increment, error) {
	var r partmap.Increment
	err := retryConflict(func() (err error) { r, err = f(); return })
	return r, err
}
