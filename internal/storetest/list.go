package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/partmap/partmap"
)

type position struct {
	p     partmap.Partition
	email string
}

func (a position) less(b position) bool {
	return a.p < b.p || (a.p == b.p && a.email < b.email)
}

func positionOf(rec partmap.Record, partitions int) position {
	return position{partmap.PartitionOf(rec.Profile.Email(), partitions), rec.Profile.Email()}
}

// listAll follows cursors to the end, checking that the order is strictly
// increasing across pages, which also rules out duplicates.
func listAll(t interface{ Fatalf(string, ...any) }, s partmap.Store, limit int) []partmap.Record {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return listWhere(t, s, limit, nil, true)
}

// listWhere is listAll for a search. strict also refuses an empty page
// reached through a cursor, which only concurrent deletes can explain: the
// profile that told the previous page another one followed was deleted.
func listWhere(t interface{ Fatalf(string, ...any) }, s partmap.Store, limit int, where []partmap.Match, strict bool) []partmap.Record {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	stats, err := s.ListPartitions(context.Background())
	if err != nil {
		t.Fatalf("partitions: %v", err)
	}
	n := stats.TotalPartitions
	var all []partmap.Record
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := s.ListProfiles(context.Background(), partmap.ListOptions{Cursor: cursor, Limit: limit, Where: where})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(page.Profiles) > limit || (page.NextCursor != "" && len(page.Profiles) != limit) {
			t.Fatalf("page %d has %d profiles with limit %d (next %q)", pages, len(page.Profiles), limit, page.NextCursor)
		}
		if strict && cursor != "" && len(page.Profiles) == 0 {
			t.Fatalf("page %d, reached through a cursor, is empty: the previous page should have been the last", pages)
		}
		for _, rec := range page.Profiles {
			if k := len(all); k > 0 && !positionOf(all[k-1], n).less(positionOf(rec, n)) {
				t.Fatalf("out of order or repeated: %s after %s", rec.Profile.Email(), all[n-1].Profile.Email())
			}
			all = append(all, rec)
		}
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// SearchEmails lists the profiles of s that match where, limit a page
// (0: the store's default), and returns their emails in the order listed.
func SearchEmails(t testing.TB, s partmap.Store, where []partmap.Match, limit int) []string {
	t.Helper()
	var out []string
	opts := partmap.ListOptions{Where: where, Limit: limit}
	for {
		page, err := s.ListProfiles(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Profiles {
			out = append(out, r.Profile.Email())
		}
		if opts.Cursor = page.NextCursor; opts.Cursor == "" {
			return out
		}
	}
}

func runList(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()

	t.Run("Enumeration", func(t *testing.T) {
		s := started(t)
		if got := listAll(t, s, 10); len(got) != 0 {
			t.Fatalf("empty directory lists %d profiles", len(got))
		}
		want := map[string]string{}
		colliding, _ := Colliding(7, partmap.DefaultPartitions, "list")
		for i := range 40 {
			want[fmt.Sprintf("user%02d@example.com", i)] = fmt.Sprint(i)
		}
		for i, e := range colliding {
			want[e] = "c" + fmt.Sprint(i)
		}
		for e, name := range want {
			put(t, s, e, name)
		}
		for _, limit := range []int{1, 3, 7, 47, 1000} {
			got := listAll(t, s, limit)
			if len(got) != len(want) {
				t.Fatalf("limit %d: listed %d profiles, want %d", limit, len(got), len(want))
			}
			for _, rec := range got {
				if want[rec.Profile.Email()] != rec.Profile["fullName"] {
					t.Fatalf("limit %d: %v", limit, rec.Profile)
				}
			}
		}
		// A page that ends exactly at the last profile is the last page.
		if page, err := s.ListProfiles(ctx, partmap.ListOptions{Limit: len(want)}); err != nil || page.NextCursor != "" {
			t.Fatalf("a page of exactly all %d profiles: next %q, %v", len(want), page.NextCursor, err)
		}
		// The default page size applies without a limit.
		page, err := s.ListProfiles(ctx, partmap.ListOptions{})
		if err != nil || len(page.Profiles) != len(want) || page.NextCursor != "" {
			t.Fatalf("default page: %d profiles, next %q, %v", len(page.Profiles), page.NextCursor, err)
		}
		stats, err := s.ListPartitions(ctx)
		if err != nil || stats.TotalProfiles != int64(len(want)) {
			t.Fatalf("partitions: total %d, %v", stats.TotalProfiles, err)
		}
		for i := 1; i < len(stats.Partitions); i++ {
			if stats.Partitions[i-1].Partition >= stats.Partitions[i].Partition {
				t.Fatal("partitions are not in order")
			}
		}
	})

	t.Run("ErrBadCursorOrLimit", func(t *testing.T) {
		s := started(t)
		for i := range 3 {
			put(t, s, fmt.Sprintf("c%d@example.com", i), "x")
		}
		page, err := s.ListProfiles(ctx, partmap.ListOptions{Limit: 1})
		if err != nil || page.NextCursor == "" {
			t.Fatalf("first page: %v, next %q", err, page.NextCursor)
		}
		good := page.NextCursor
		forged := []string{
			"x", "!!!", strings.Repeat("A", 30), good[:len(good)-1], good + "A",
			flip(good, 0), flip(good, len(good)/2), flip(good, len(good)-2),
		}
		for _, c := range forged {
			if c == good {
				continue
			}
			if _, err := s.ListProfiles(ctx, partmap.ListOptions{Cursor: c, Limit: 1}); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("cursor %q: got %v, want invalid", c, err)
			}
		}
		// A cursor from another directory is foreign too.
		other := started(t)
		put(t, other, "c0@example.com", "x")
		put(t, other, "c1@example.com", "x")
		op, _ := other.ListProfiles(ctx, partmap.ListOptions{Limit: 1})
		if _, err := s.ListProfiles(ctx, partmap.ListOptions{Cursor: op.NextCursor, Limit: 1}); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Errorf("another directory's cursor: got %v, want invalid", err)
		}
		for _, limit := range []int{-1, partmap.MaxPageLimit + 1} {
			if _, err := s.ListProfiles(ctx, partmap.ListOptions{Limit: limit}); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("limit %d: got %v, want invalid", limit, err)
			}
		}
	})

	// Profiles that exist for the whole scan are listed exactly once while
	// other profiles are created and deleted around them.
	t.Run("ConcurrentEnumeration", func(t *testing.T) {
		s := started(t)
		stable := map[string]bool{}
		for i := range 150 {
			e := fmt.Sprintf("stable%03d@example.com", i)
			stable[e] = true
			put(t, s, e, "stable")
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		// Stop the writers before the test ends, also when it fails.
		defer func() { stop.Store(true); wg.Wait() }()
		for w := range 4 {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					e := fmt.Sprintf("churn%d-%d@example.com", w, i%30)
					var err error
					if i%60 < 30 {
						_, _, err = partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e}, partmap.Condition{})
					} else {
						err = partmap.DeleteProfile(ctx, s, e, partmap.Condition{})
					}
					if err != nil && partmap.ErrorCode(err) != partmap.ENOTFOUND && partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
						t.Errorf("writer %d: %v", w, err)
						return
					}
				}
			})
		}
		for range 3 {
			seen := map[string]int{}
			for _, rec := range listWhere(t, s, 7, nil, false) {
				seen[rec.Profile.Email()]++
			}
			for e := range stable {
				if seen[e] != 1 {
					t.Fatalf("%s listed %d times", e, seen[e])
				}
			}
		}
	})
}

// flip changes one character of a cursor.
func flip(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
