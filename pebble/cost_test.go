package pebble

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// collidingEmails returns n emails that all fall in partition target. It
// hashes bytes in place: 100,000 emails take about 10^8 candidates.
func collidingEmails(n int, target partmap.Partition) []string {
	out := make([]string, 0, n)
	buf := make([]byte, 0, 32)
	for i := 0; len(out) < n; i++ {
		buf = append(strconv.AppendInt(append(buf[:0], 'u'), int64(i), 10), "@example.com"...)
		h := uint32(2166136261)
		for _, c := range buf {
			h = (h ^ uint32(c)) * 16777619
		}
		if partmap.Partition(h%partmap.DefaultPartitions) == target {
			out = append(out, string(buf))
		}
	}
	return out
}

// fillPartition stores a profile for each email in bulk, through the engine:
// many records per invocation, so that filling is not fsync-bound.
func fillPartition(tb testing.TB, s *Store, p partmap.Partition, emails []string) {
	tb.Helper()
	ctx := context.Background()
	if _, err := s.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	part := engine.Part{Partition: p}
	inv := engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}
	for start := 0; start < len(emails); start += 5000 {
		err := s.Engine().Invoke(ctx, inv, func(tx *engine.Tx) error {
			for _, e := range emails[start:min(start+5000, len(emails))] {
				prof := partmap.Profile{partmap.FieldEmail: e, "fullName": "User " + e, "companyName": "Acme", "customerTier": "gold", "visits": "0"}
				if err := tx.Put(part, e, partmap.Record{Profile: prof, Version: 1}, partmap.OpPut); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func openFilled(tb testing.TB, size int) (*Store, []string) {
	tb.Helper()
	s, _ := MustOpen(tb, nil)
	emails := collidingEmails(size, 278)
	fillPartition(tb, s, 278, emails)
	return s, emails
}

// openBalanced holds total profiles, size of them in partition 278 and the
// rest in partition 500, all flushed to sstables: stores that differ only in
// how full the measured partition is, not in how much data they hold.
func openBalanced(tb testing.TB, size, total int) (*Store, []string) {
	tb.Helper()
	s, emails := openFilled(tb, size)
	if rest := total - size; rest > 0 {
		fillPartition(tb, s, 500, collidingEmails(rest, 500))
	}
	if err := s.db.Flush(); err != nil {
		tb.Fatal(err)
	}
	return s, emails
}

// Writing one profile writes the same bytes whatever the size of its
// partition: a write touches its record (and the count), never the bucket.
func TestWriteCostIndependentOfPartitionSize(t *testing.T) {
	ctx := context.Background()
	walBytes := func(s *Store, write func() error) uint64 {
		t.Helper()
		before := s.db.Metrics().WAL.BytesIn
		if err := write(); err != nil {
			t.Fatal(err)
		}
		return s.db.Metrics().WAL.BytesIn - before
	}
	measure := func(size int) (put, patch, create uint64) {
		emails := collidingEmails(size+1, 278) // the last is created below
		s, _ := MustOpen(t, nil)
		fillPartition(t, s, 278, emails[:size])
		e := emails[0]
		put = walBytes(s, func() error {
			_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "fullName": "Replaced"}, partmap.Condition{})
			return err
		})
		patch = walBytes(s, func() error {
			_, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"visits": ptr("1")}, partmap.Condition{})
			return err
		})
		newEmail := emails[size]
		create = walBytes(s, func() error {
			_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: newEmail}, partmap.Condition{})
			return err
		})
		return put, patch, create
	}
	smallPut, smallPatch, smallCreate := measure(10)
	bigPut, bigPatch, bigCreate := measure(5000)
	t.Logf("WAL bytes per write, 10 vs 5,000 profiles: put %d/%d, patch %d/%d, create %d/%d",
		smallPut, bigPut, smallPatch, bigPatch, smallCreate, bigCreate)
	// Emails differ in length by a few bytes, and a write holds its email
	// three times (the key, the record and its change feed event); a
	// count's varint differs too. Rewriting the partition would be
	// hundreds of kilobytes.
	for _, c := range [][2]uint64{{smallPut, bigPut}, {smallPatch, bigPatch}, {smallCreate, bigCreate}} {
		if c[1] > c[0]+32 {
			t.Fatalf("a write into a partition of 5,000 profiles wrote %d bytes, against %d with 10", c[1], c[0])
		}
	}
}

func ptr(s string) *string { return &s }

// BenchmarkPartitionSize compares one-profile operations in a partition of
// 10 profiles and of 100,000. Both stores hold 100,010 profiles in all (the
// rest in another partition) and both touch the same 10 profiles, so the
// comparison is about the partition's size and nothing else: not the total
// data, nor how much of it is hot. Filling takes a few seconds.
//
//	go test -run '^$' -bench BenchmarkPartitionSize -benchtime 2s -count 3 ./pebble
func BenchmarkPartitionSize(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{10, 100000} {
		s, emails := openBalanced(b, size, 100010)
		pick := func(i int) string { return emails[i%10] }
		b.Run(fmt.Sprintf("profiles=%d/get", size), func(b *testing.B) {
			for i := range b.N {
				if _, err := s.FindProfile(ctx, pick(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("profiles=%d/put", size), func(b *testing.B) {
			for i := range b.N {
				p := partmap.Profile{partmap.FieldEmail: pick(i), "fullName": "Put", "companyName": "Acme", "customerTier": "gold"}
				if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("profiles=%d/patch", size), func(b *testing.B) {
			for i := range b.N {
				if _, err := partmap.PatchProfile(ctx, s, pick(i), partmap.Patch{"visits": ptr(strconv.Itoa(i))}, partmap.Condition{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
