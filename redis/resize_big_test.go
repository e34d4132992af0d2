package redis_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// collidingFast returns n emails of one partition of partitions: what
// storetest.Colliding does, without a string per try, for big n.
func collidingFast(n, partitions int) ([]string, partmap.Partition) {
	want := partmap.PartitionOf("big0@example.com", partitions)
	out := make([]string, 0, n)
	buf := make([]byte, 0, 64)
	for i := 0; len(out) < n; i++ {
		buf = append(strconv.AppendInt(append(buf[:0], "big"...), int64(i), 10), "@example.com"...)
		h := uint32(2166136261)
		for _, c := range buf {
			h = (h ^ uint32(c)) * 16777619
		}
		if partmap.Partition(h%uint32(partitions)) == want {
			out = append(out, string(buf))
		}
	}
	return out, want
}

// A resize copies a big partition: its copy reads the next generation in
// batches and keeps its locks alive however long it takes, here with a
// lock TTL far shorter than the copy. PARTMAP_BIG_PARTITION sets the
// partition's size (default 8,000, whose copy outlasts the TTL many times
// over; docs/PERFORMANCE.md has a run of 200,000).
func TestResizeBigPartition(t *testing.T) {
	n := 8000
	if v := os.Getenv("PARTMAP_BIG_PARTITION"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	s := openStarted(t, open, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: 50 * time.Millisecond}, LockTTL: 300 * time.Millisecond})
	emails, p := collidingFast(n, partmap.DefaultPartitions)
	for lo := 0; lo < n; lo += partmap.MaxBulkProfiles {
		var batch []partmap.Profile
		for _, e := range emails[lo:min(n, lo+partmap.MaxBulkProfiles)] {
			batch = append(batch, partmap.Profile{partmap.FieldEmail: e, "customerTier": "gold"})
		}
		storetest.MustUpsert(t, s, batch)
	}
	start := time.Now()
	if _, err := s.Resize(ctx, 2*partmap.DefaultPartitions); err != nil {
		t.Fatal(err)
	}
	st := storetest.WaitResized(t, s)
	t.Logf("resized %d profiles of %s to %d partitions in %v", n, p, st.Partitions, time.Since(start).Round(time.Millisecond))
	if st.Partitions != 2*partmap.DefaultPartitions || st.LastError != "" {
		t.Fatalf("after the resize: %+v", st)
	}
	stats, err := s.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.TotalProfiles != int64(n) {
		t.Fatalf("%d profiles after the resize, want %d", stats.TotalProfiles, n)
	}
	for _, e := range []string{emails[0], emails[n/2], emails[n-1]} {
		if rec, err := s.FindProfile(ctx, e); err != nil || rec.Profile["customerTier"] != "gold" {
			t.Fatalf("%s after the resize: %v %v", e, rec.Profile, err)
		}
	}
	storetest.CheckAll(t, s)
}
