package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

func runWholeMapLock(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	t.Run("WholeMapLock", func(t *testing.T) {
		s := started(t)
		alice := partmap.Profile{partmap.FieldEmail: "alice@example.com", "fullName": "Alice"}
		if _, _, err := partmap.UpsertProfile(ctx, s, alice, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []time.Duration{0, -time.Second, partmap.MaxWholeMapLock + time.Second} {
			if _, err := s.LockWholeMap(ctx, bad); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("lock for %v: got %v, want invalid", bad, err)
			}
		}
		l, err := s.LockWholeMap(ctx, time.Minute)
		if err != nil || l.Lease == "" || time.Until(l.Expires) < 50*time.Second {
			t.Fatalf("lock: %+v %v", l, err)
		}
		if _, err := s.LockWholeMap(ctx, time.Minute); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("a second whole-map lock: got %v, want a lock conflict", err)
		}
		if _, err := s.FindProfile(ctx, "alice@example.com"); err != nil {
			t.Fatalf("a read under the whole-map lock: %v", err)
		}
		// A write either fails with a lock conflict or (a client that
		// retries conflicts) completes only after the release.
		done := make(chan error, 1)
		go func() {
			_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "bob@example.com"}, partmap.Condition{})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, partmap.ErrLockConflict) {
				t.Fatalf("a write under the whole-map lock: got %v, want a lock conflict", err)
			}
			// It says what holds the partition, and until when.
			var e *partmap.Error
			if !errors.As(err, &e) || !strings.Contains(e.Message, "whole map is locked") || e.RetryAfter < 30*time.Second {
				t.Fatalf("a write under the whole-map lock: %v (retry after %v); want the whole-map lock named, with its end", err, e.RetryAfter)
			}
		case <-time.After(300 * time.Millisecond):
			if err := s.UnlockWholeMap(ctx, l.Lease); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the retried write after the release: %v", err)
			}
		}
		s.UnlockWholeMap(ctx, l.Lease) // released above, or now
		if err := s.UnlockWholeMap(ctx, l.Lease); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("a second release: got %v, want not-found", err)
		}
		if _, _, err := partmap.UpsertProfile(ctx, s, alice, partmap.Condition{}); err != nil {
			t.Fatalf("a write after the release: %v", err)
		}

		// A lease that is not released expires.
		if _, err := s.LockWholeMap(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, _, err := partmap.UpsertProfile(ctx, s, alice, partmap.Condition{})
			if err == nil {
				break
			}
			if !errors.Is(err, partmap.ErrLockConflict) || time.Now().After(deadline) {
				t.Fatalf("a write after the lease expired: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
