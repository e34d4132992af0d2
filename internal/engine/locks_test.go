package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

func parts(ps ...partmap.Partition) []Part {
	out := make([]Part, len(ps))
	for i, p := range ps {
		out[i] = Part{Partition: p}
	}
	return out
}

func TestLocalLocks(t *testing.T) {
	ctx := context.Background()
	t.Run("OKReleasedAndTakenAgain", func(t *testing.T) {
		var l localLocks
		held, err := l.lock(ctx, parts(1, 3), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.lock(ctx, parts(3), 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("a held lock was taken again: %v", err)
		}
		unlock(held)
		if _, err := l.lock(ctx, parts(1, 3), 0); err != nil {
			t.Fatalf("locks not released: %v", err)
		}
	})
	t.Run("OKGenerationsApart", func(t *testing.T) {
		var l localLocks
		if _, err := l.lock(ctx, []Part{{Generation: 0, Partition: 5}}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := l.lock(ctx, []Part{{Generation: 1, Partition: 5}}, 0); err != nil {
			t.Fatalf("partition 5 of another generation: %v", err)
		}
	})
	t.Run("ErrConflictHoldsNothing", func(t *testing.T) {
		var l localLocks
		held, _ := l.lock(ctx, parts(2), 0)
		if _, err := l.lock(ctx, parts(0, 1, 2), 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("got %v, want a lock conflict", err)
		}
		// 0 and 1 were taken before 2 failed; they must have been released.
		if again, err := l.lock(ctx, parts(0, 1), 0); err != nil {
			t.Fatalf("a failed lock kept some locks: %v", err)
		} else {
			unlock(again)
		}
		unlock(held)
	})
	t.Run("ErrContextCancelled", func(t *testing.T) {
		var l localLocks
		held, _ := l.lock(ctx, parts(0), 0)
		defer unlock(held)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.lock(cctx, parts(0), time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
	t.Run("OKForgottenGenerationIsFree", func(t *testing.T) {
		var l localLocks
		l.lock(ctx, []Part{{Generation: 3, Partition: 1}}, 0)
		l.forget(3)
		if _, err := l.lock(ctx, []Part{{Generation: 3, Partition: 1}}, 0); err != nil {
			t.Fatalf("after forget: %v", err)
		}
	})
}

// A lock that gives up after waiting, or because its context ended, holds
// nothing: the partitions it took before the busy one are free again.
func TestLocalLocksGiveBackOnFailure(t *testing.T) {
	for name, try := range map[string]func(l *localLocks) error{
		"AfterWaiting": func(l *localLocks) error {
			_, err := l.lock(context.Background(), parts(0, 1, 2), 10*time.Millisecond)
			return err
		},
		"OnCancel": func(l *localLocks) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_, err := l.lock(ctx, parts(0, 1, 2), time.Hour)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			var l localLocks
			held, _ := l.lock(context.Background(), parts(2), 0)
			defer unlock(held)
			if err := try(&l); err == nil {
				t.Fatal("took a held lock")
			}
			again, err := l.lock(context.Background(), parts(0, 1), 0)
			if err != nil {
				t.Fatalf("a failed lock kept partitions: %v", err)
			}
			unlock(again)
		})
	}
}
