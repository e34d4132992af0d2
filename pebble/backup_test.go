package pebble_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

// A backup taken while writers run is one instant of the directory: every
// counter in it is at least what was acknowledged before the backup began
// and at most what was written by its end, each partition's count and
// index entries agree with its profiles, and the restored directory
// serves. Transfers between two counters keep their sum, so an instant
// that split a transaction would show.
func TestBackupUnderWriters(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, nil)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const writers, total = 8, 1000
	email := func(w int) string { return fmt.Sprintf("writer%d@example.com", w) }
	for w := range writers {
		p := partmap.Profile{"emailAddress": email(w), "n": "0", "balance": strconv.Itoa(total), "customerTier": "gold"}
		if _, _, err := s.UpsertProfile(ctx, p, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	var acked [writers]atomic.Int64 // increments acknowledged
	var sent [writers]atomic.Int64  // increments sent
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sent[w].Add(1)
				if _, err := s.IncrementField(ctx, email(w), "n", 1, partmap.Condition{}); err != nil {
					t.Error(err)
					return
				}
				acked[w].Add(1)
				// A transfer to the next writer's balance: all or nothing.
				_, err := s.Transact(ctx, []partmap.Operation{
					{Op: partmap.OpIncrement, Email: email(w), Field: "balance", By: -1},
					{Op: partmap.OpIncrement, Email: email((w + 1) % writers), Field: "balance", By: 1},
				})
				if err != nil && partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
					t.Error(err)
					return
				}
			}
		}()
	}
	for acked[0].Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	var before [writers]int64
	for w := range writers {
		before[w] = acked[w].Load()
	}
	var archive bytes.Buffer
	info, err := s.Backup(ctx, &archive)
	var after [writers]int64
	for w := range writers {
		after[w] = sent[w].Load()
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if info.Files == 0 || info.Bytes == 0 {
		t.Fatalf("backup info %+v", info)
	}

	dir := filepath.Join(t.TempDir(), "backup")
	if _, err := pebble.Unpack(bytes.NewReader(archive.Bytes()), dir, nil); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "restored")
	got, profiles, err := pebble.Restore(ctx, dir, data, nil)
	if err != nil || got != info || profiles != writers {
		t.Fatalf("restore: %+v, %d profiles, %v (backup %+v)", got, profiles, err, info)
	}
	r := MustReopen(t, data, nil)
	sum := 0
	for w := range writers {
		rec, err := r.FindProfile(ctx, email(w))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(rec.Profile["n"], 10, 64)
		if n < before[w] || n > after[w] {
			t.Errorf("%s: n is %d in the backup; %d were acknowledged before it began and %d sent by its end", email(w), n, before[w], after[w])
		}
		b, _ := strconv.Atoi(rec.Profile["balance"])
		sum += b
	}
	if sum != writers*total {
		t.Errorf("the balances sum to %d in the backup, not %d: it split a transaction", sum, writers*total)
	}
	if err := r.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
		if !c.OK() {
			return fmt.Errorf("drift in %s: %+v", c.Partition, c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// An archive cut short, or holding anything but data files, is refused
// and leaves nothing behind; a backup or restore never writes into a
// directory that is not empty.
func TestBackupRefusesDamage(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, nil)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpsertProfile(ctx, partmap.Profile{"emailAddress": "a@example.com"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := s.Backup(ctx, &archive); err != nil {
		t.Fatal(err)
	}
	whole := archive.Bytes()
	for _, cut := range []int{0, 100, len(whole) / 2, len(whole) - 2100, len(whole) - 1600} { // the manifest is in the last 2 KiB
		dir := filepath.Join(t.TempDir(), "b")
		if _, err := pebble.Unpack(bytes.NewReader(whole[:cut]), dir, nil); err == nil {
			t.Fatalf("an archive cut at %d of %d bytes was taken", cut, len(whole))
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("an archive cut at %d left %d files", cut, len(entries))
		}
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	if _, err := pebble.Unpack(&evil, filepath.Join(t.TempDir(), "b"), nil); err == nil || !strings.Contains(err.Error(), "not a data file") {
		t.Fatalf("an archive with ../escape: %v", err)
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), []byte("mine"), 0o644)
	if _, err := pebble.Unpack(bytes.NewReader(whole), full, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("unpack into a directory that is not empty: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := pebble.Unpack(bytes.NewReader(whole), dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pebble.Restore(ctx, dir, full, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a directory that is not empty: %v", err)
	}
	if _, _, err := pebble.Restore(ctx, t.TempDir(), filepath.Join(t.TempDir(), "d"), nil); err == nil || !strings.Contains(err.Error(), "not a partmap backup") {
		t.Fatalf("restore of a directory that is no backup: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep")); err != nil || string(b) != "mine" {
		t.Fatal("a refused restore touched the directory")
	}
}

// A checkpoint that a crash left beside the data directory goes at the
// next open; another directory's is left alone.
func TestOpenRemovesStaleBackups(t *testing.T) {
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	stale := filepath.Join(parent, ".partmap-backup-data-123")
	other := filepath.Join(parent, ".partmap-backup-database-456")
	for _, dir := range []string{stale, other} {
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	MustReopen(t, data, nil)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale checkpoint is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another directory's checkpoint was removed: %v", err)
	}
}
