package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

func TestLocalLocks(t *testing.T) {
	ctx := context.Background()
	l := NewLocalLocks(4)

	t.Run("OKDuplicatesAndOrder", func(t *testing.T) {
		lease, err := l.Lock(ctx, []partmap.Partition{3, 1, 3, 1}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := lease.(*localLease).held; len(got) != 2 || got[0] != 1 || got[1] != 3 {
			t.Fatalf("held %v, want [1 3]", got)
		}
		lease.Release()
		lease.Release() // idempotent
		if _, err := l.Lock(ctx, []partmap.Partition{1, 3}, 0); err != nil {
			t.Fatalf("locks not released: %v", err)
		}
	})

	t.Run("ErrConflictHoldsNothing", func(t *testing.T) {
		l := NewLocalLocks(4)
		held, _ := l.Lock(ctx, []partmap.Partition{2}, 0)
		if _, err := l.Lock(ctx, []partmap.Partition{0, 1, 2}, 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("got %v, want a lock conflict", err)
		}
		// 0 and 1 were taken before 2 failed; they must have been released.
		if lease, err := l.Lock(ctx, []partmap.Partition{0, 1}, 0); err != nil {
			t.Fatalf("a failed Lock kept some locks: %v", err)
		} else {
			lease.Release()
		}
		held.Release()
	})

	t.Run("ErrContextCancelled", func(t *testing.T) {
		l := NewLocalLocks(1)
		held, _ := l.Lock(ctx, []partmap.Partition{0}, 0)
		defer held.Release()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Lock(cctx, []partmap.Partition{0}, time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
}

// A Lock that gives up after waiting, or because its context ended, holds
// nothing: the partitions it took before the busy one are free again.
func TestLocalLocksGiveBackOnFailure(t *testing.T) {
	for name, try := range map[string]func(l *LocalLocks) error{
		"AfterWaiting": func(l *LocalLocks) error {
			_, err := l.Lock(context.Background(), []partmap.Partition{0, 1, 2}, 10*time.Millisecond)
			return err
		},
		"OnCancel": func(l *LocalLocks) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_, err := l.Lock(ctx, []partmap.Partition{0, 1, 2}, time.Hour)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := NewLocalLocks(4)
			held, _ := l.Lock(context.Background(), []partmap.Partition{2}, 0)
			defer held.Release()
			if err := try(l); err == nil {
				t.Fatal("took a held lock")
			}
			lease, err := l.Lock(context.Background(), []partmap.Partition{0, 1}, 0)
			if err != nil {
				t.Fatalf("a failed Lock kept partitions: %v", err)
			}
			lease.Release()
		})
	}
}
