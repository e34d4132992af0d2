package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

func TestRecordLocks(t *testing.T) {
	ctx := context.Background()
	p := Part{Partition: 4}
	t.Run("OKRecordsOfOnePartitionApart", func(t *testing.T) {
		var l recordLocks
		a, err := l.lockRecords(ctx, p, []string{"a"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.lockRecords(ctx, p, []string{"b", "c"}, 0)
		if err != nil {
			t.Fatalf("another record of the partition: %v", err)
		}
		if _, err := l.lockRecords(ctx, p, []string{"c", "d"}, 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("a held record was taken again: %v", err)
		}
		// d was taken before c failed; it must have been released.
		d, err := l.lockRecords(ctx, p, []string{"d"}, 0)
		if err != nil {
			t.Fatalf("a failed lock kept a record: %v", err)
		}
		a()
		b()
		d()
		if len(l.parts) != 0 {
			t.Fatalf("%d partitions left in the table after every release", len(l.parts))
		}
	})
	t.Run("OKWholeExcludesRecords", func(t *testing.T) {
		var l recordLocks
		rec, _ := l.lockRecords(ctx, p, []string{"a"}, 0)
		if _, err := l.lockParts(ctx, []Part{p}, 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("whole partition while a record is held: %v", err)
		}
		// A whole locker that waits is let in as soon as the record goes,
		// and record writers that come meanwhile queue behind it.
		got := make(chan func())
		go func() {
			whole, err := l.lockParts(ctx, []Part{p}, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got <- whole
		}()
		for {
			l.mu.Lock()
			queued := l.parts[p].queued
			l.mu.Unlock()
			if queued == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := l.lockRecords(ctx, p, []string{"b"}, 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("a record writer went ahead of a queued whole locker: %v", err)
		}
		rec()
		whole := <-got
		if _, err := l.lockRecords(ctx, p, []string{"b"}, 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("a record while the partition is held whole: %v", err)
		}
		if other, err := l.lockRecords(ctx, Part{Partition: 5}, []string{"b"}, 0); err != nil {
			t.Fatalf("a record of another partition: %v", err)
		} else {
			other()
		}
		whole()
		if b, err := l.lockRecords(ctx, p, []string{"b"}, 0); err != nil {
			t.Fatalf("after the whole lock: %v", err)
		} else {
			b()
		}
	})
	t.Run("OKOneRecordSerialises", func(t *testing.T) {
		var l recordLocks
		var inside, most int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 50 {
					release, err := l.lockRecords(ctx, p, []string{"hot"}, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					inside++
					most = max(most, inside)
					mu.Unlock()
					mu.Lock()
					inside--
					mu.Unlock()
					release()
				}
			})
		}
		wg.Wait()
		if most != 1 {
			t.Fatalf("%d holders of one record at once", most)
		}
		if len(l.parts) != 0 {
			t.Fatalf("%d partitions left in the table", len(l.parts))
		}
	})
	t.Run("ErrDeadlineAndContext", func(t *testing.T) {
		var l recordLocks
		whole, _ := l.lockParts(ctx, []Part{p}, 0)
		if _, err := l.lockRecords(ctx, p, []string{"a"}, 20*time.Millisecond); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("got %v, want a conflict after the wait", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.lockRecords(cctx, p, []string{"a"}, time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want the context's error", err)
		}
		if _, err := l.lockParts(cctx, []Part{p}, time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want the context's error", err)
		}
		whole()
		if len(l.parts) != 0 {
			t.Fatalf("%d partitions left in the table", len(l.parts))
		}
	})
}
