package storetest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// deskIndex is a support desk's index: names and notes as words, tiers as
// tags, visits as a sortable number.
var deskIndex = partmap.IndexDefinition{Name: "desk", Fields: []partmap.IndexField{
	{Name: "fullName", Type: partmap.IndexText},
	{Name: "notes", Type: partmap.IndexText},
	{Name: "customerTier", Type: partmap.IndexTag},
	{Name: "visits", Type: partmap.IndexNumeric, Sortable: true},
	{Name: "companyName", Type: partmap.IndexTag, Sortable: true},
}}

// waitBuilt waits until the index answers queries.
func waitBuilt(t testing.TB, s partmap.Store, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.Search(context.Background(), name, partmap.SearchOptions{Query: "*", Limit: -1})
		if err == nil {
			return
		}
		if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || time.Now().After(deadline) {
			t.Fatalf("index %s: %v", name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hitEmails(r partmap.SearchResult) []string {
	out := make([]string, len(r.Hits))
	for i, h := range r.Hits {
		out[i] = h.Email
	}
	return out
}

// RunSearchIndexes runs the conformance suite of search indexes
// (Store.CreateIndex and the rest), for the stores that keep them: every
// store but the original design's baseline (internal/bucket), which keeps
// no index and answers them unsupported.
func RunSearchIndexes(t *testing.T, open Opener) {
	started := startedBy(open)
	runSearchIndexes(t, started)
	runSearchSortedMerge(t, started)
	runSearchIndexRecreatedWhileBuilding(t, started)
	runSearchIndexDropUnderDeletes(t, started)
	runSearchIndexDropWhileBuilding(t, started)
	runSearchIndexDroppedTwice(t, started)
	runSearchExclusiveInfinity(t, started)
	runSearchHugeOffset(t, started)
}

func runSearchIndexes(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchIndexSmoke", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		profiles := []partmap.Profile{
			{partmap.FieldEmail: "alice@example.com", "fullName": "Alice Liddell", "customerTier": "gold", "visits": "12", "companyName": "Acme"},
			{partmap.FieldEmail: "bob@example.com", "fullName": "Bob Builder", "customerTier": "silver", "visits": "3", "notes": "running late"},
			{partmap.FieldEmail: "carol@example.com", "fullName": "Carol Alison", "customerTier": "gold, vip", "visits": "40"},
		}
		for _, p := range profiles {
			if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateIndex(ctx, deskIndex); partmap.ErrorCode(err) != partmap.EEXISTS {
			t.Fatalf("second create: %v", err)
		}
		waitBuilt(t, s, "desk")
		partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "dan@example.com", "fullName": "Dan Alinsky", "customerTier": "gold", "visits": "11"}, partmap.Condition{})
		for _, tc := range []struct {
			q      string
			sortBy string
			desc   bool
			want   []string
		}{
			{"ali*", "", false, []string{"alice@example.com", "carol@example.com", "dan@example.com"}},
			{"@customerTier:{gold} @visits:[(10 +inf]", "visits", false, []string{"dan@example.com", "alice@example.com", "carol@example.com"}},
			{"@customerTier:{gold}", "visits", true, []string{"carol@example.com", "alice@example.com", "dan@example.com"}},
			{"run", "", false, []string{"bob@example.com"}},
			{"-@customerTier:{gold}", "", false, []string{"bob@example.com"}},
			{"@customerTier:{vip|silver}", "email", false, nil},
			{"@companyName:{acme}", "", false, []string{"alice@example.com"}},
		} {
			res, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: tc.q, SortBy: tc.sortBy, Descending: tc.desc, NoContent: true})
			if tc.sortBy == "email" {
				if partmap.ErrorCode(err) != partmap.EINVALID {
					t.Errorf("%s SORTBY %s: %v", tc.q, tc.sortBy, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", tc.q, err)
				continue
			}
			got := hitEmails(res)
			if tc.sortBy == "" {
				slices.Sort(got)
			}
			if !slices.Equal(got, tc.want) || res.Total != int64(len(tc.want)) {
				t.Errorf("%s SORTBY %s: got %v (total %d), want %v", tc.q, tc.sortBy, got, res.Total, tc.want)
			}
		}
		if _, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: "@nope:{x}"}); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Errorf("unknown field: %v", err)
		}
		if _, err := s.Search(ctx, "nope", partmap.SearchOptions{Query: "*"}); partmap.ErrorCode(err) != partmap.ENOTFOUND {
			t.Errorf("unknown index: %v", err)
		}
		if err := s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			if !c.OK() {
				return fmt.Errorf("check %d: %+v", c.Partition, c)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// The directory's equality indexes are the index "profiles": TAG
		// fields of whole, case-sensitive values.
		infos, err := s.ListIndexes(ctx)
		if err != nil || len(infos) != 2 || infos[0].Name != partmap.LegacyIndexName || !infos[0].Legacy || infos[1].Name != "desk" ||
			infos[1].Building || infos[1].Docs != 4 {
			t.Fatalf("indexes: %+v %v", infos, err)
		}
		for q, want := range map[string][]string{
			"@companyName:{Acme}":                              {"alice@example.com"},
			"@companyName:{acme}":                              nil,
			"@customerTier:{gold}":                             {"alice@example.com", "dan@example.com"},
			`@customerTier:{gold\, vip} | @companyName:{Acme}`: {"alice@example.com", "carol@example.com"},
		} {
			res, err := s.Search(ctx, partmap.LegacyIndexName, partmap.SearchOptions{Query: q, NoContent: true})
			got := hitEmails(res)
			slices.Sort(got)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("legacy %s: %v %v, want %v", q, got, err, want)
			}
		}
		if err := s.DropIndex(ctx, partmap.LegacyIndexName); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Errorf("drop the legacy index: %v", err)
		}
		if err := s.DropIndex(ctx, "desk"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: "*"}); partmap.ErrorCode(err) != partmap.ENOTFOUND {
			t.Errorf("dropped index: %v", err)
		}
	})
}

// A sorted query over more matches than are sorted in memory merges the
// partitions' sort keys: the same order as the reference, ties by email,
// profiles without the field last, at every offset.
func runSearchSortedMerge(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchSortedMerge", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		waitBuilt(t, s, "desk")
		const n = 2600
		var all []partmap.Profile
		for i := range n {
			p := partmap.Profile{partmap.FieldEmail: fmt.Sprintf("m%04d@example.com", i), "customerTier": []string{"gold", "silver"}[i%2]}
			if i%13 != 0 { // some have no visits: they sort last
				p["visits"] = strconv.Itoa(i % 97) // many ties
			}
			all = append(all, p)
		}
		for lo := 0; lo < n; lo += 500 {
			res, err := s.UpsertProfiles(ctx, all[lo:min(lo+500, n)])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
		}
		var gold []partmap.Profile
		for _, p := range all {
			if p["customerTier"] == "gold" {
				gold = append(gold, p)
			}
		}
		for _, desc := range []bool{false, true} {
			want := slices.Clone(gold)
			slices.SortFunc(want, func(a, b partmap.Profile) int {
				av, aok := a["visits"]
				bv, bok := b["visits"]
				switch {
				case aok != bok:
					if aok {
						return -1
					}
					return 1
				case aok:
					x, _ := strconv.Atoi(av)
					y, _ := strconv.Atoi(bv)
					if c := cmp.Compare(x, y); c != 0 {
						if desc {
							return -c
						}
						return c
					}
				}
				return strings.Compare(a[partmap.FieldEmail], b[partmap.FieldEmail])
			})
			for _, page := range [][2]int{{0, 10}, {7, 25}, {1150, 100}, {1290, 50}} {
				res, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: "@customerTier:{gold}", SortBy: "visits", Descending: desc,
					Offset: page[0], Limit: page[1], NoContent: true})
				if err != nil {
					t.Fatal(err)
				}
				var wantEmails []string
				for _, p := range want[min(page[0], len(want)):min(page[0]+page[1], len(want))] {
					wantEmails = append(wantEmails, p[partmap.FieldEmail])
				}
				if got := hitEmails(res); !slices.Equal(got, wantEmails) || res.Total != int64(len(gold)) {
					t.Errorf("desc %v LIMIT %d %d: got %v (total %d), want %v (total %d)", desc, page[0], page[1], got, res.Total, wantEmails, len(gold))
				}
			}
		}
	})
}

// An index dropped and created again while its first build runs is built
// again: the first build, finding its index gone, must not keep the second
// from starting.
func runSearchIndexRecreatedWhileBuilding(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchIndexRecreatedWhileBuilding", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "alice@example.com", "customerTier": "gold"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		for { // until the build has started
			infos, err := s.ListIndexes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(infos, func(x partmap.IndexInfo) bool { return x.Name == "desk" })
			if !infos[i].Building {
				t.Skip("the build ended before it could be interrupted")
			}
			if infos[i].Progress > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := s.DropIndex(ctx, "desk"); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: "@customerTier:{gold}", NoContent: true})
			if err == nil {
				if got := hitEmails(res); !slices.Equal(got, []string{"alice@example.com"}) {
					t.Fatalf("got %v", got)
				}
				return
			}
			if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || time.Now().After(deadline) {
				t.Fatalf("the index created again: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// A profile deleted after its index was dropped, before the drop's
// cleaning reached its partition, leaves no entry behind: the next index
// reuses the dropped one's entry fields, and must not find it.
func runSearchIndexDropUnderDeletes(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchIndexDropUnderDeletes", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		waitBuilt(t, s, "desk")
		const n = 1000
		var all []partmap.Profile
		for i := range n {
			all = append(all, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("d%04d@example.com", i), "customerTier": "gold", "fullName": "Dee Dropped"})
		}
		for lo := 0; lo < n; lo += 500 {
			if _, err := s.UpsertProfiles(ctx, all[lo:lo+500]); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < n; i += 4 {
					// The cleaning holds each partition's lock a moment: a
					// conflict is retried, as a client would.
					if err := retry(func() error {
						err := partmap.DeleteProfile(ctx, s, all[i][partmap.FieldEmail], partmap.Condition{})
						if partmap.ErrorCode(err) == partmap.ENOTFOUND {
							err = nil // a retried delete that had landed
						}
						return err
					}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		if err := s.DropIndex(ctx, "desk"); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		time.Sleep(time.Second) // the cleaning has ended
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		waitBuilt(t, s, "desk")
		for _, q := range []string{"@customerTier:{gold}", "dee"} {
			res, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: q, NoContent: true})
			if err != nil || res.Total != 0 || len(res.Hits) != 0 {
				t.Errorf("%s over deleted profiles: total %d, %d hits, %v", q, res.Total, len(res.Hits), err)
			}
		}
		if err := s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			if !c.OK() {
				return fmt.Errorf("partition %d: %d drifts, first %+v", c.Partition, len(c.Drift), c.Drift[0])
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
}

// An index dropped as its build starts leaves no entry behind, even where
// the build went on after the drop (on a shared store, both the build and
// the drop's cleaning wait for the other servers, and start together): the next index, on other fields but the
// same entry fields, finds nothing it did not index.
func runSearchIndexDropWhileBuilding(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchIndexDropWhileBuilding", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		const n = 1000
		var all []partmap.Profile
		for i := range n {
			all = append(all, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("b%04d@example.com", i), "customerTier": "gold", "notes": "silver"})
		}
		for lo := 0; lo < n; lo += 500 {
			if _, err := s.UpsertProfiles(ctx, all[lo:lo+500]); err != nil {
				t.Fatal(err)
			}
		}
		tiers := partmap.IndexDefinition{Name: "tiers", Fields: []partmap.IndexField{{Name: "customerTier", Type: partmap.IndexTag}}}
		notes := partmap.IndexDefinition{Name: "notes", Fields: []partmap.IndexField{{Name: "notes", Type: partmap.IndexTag}}}
		if err := s.CreateIndex(ctx, tiers); err != nil {
			t.Fatal(err)
		}
		if err := s.DropIndex(ctx, "tiers"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the cleaning has ended
		if err := s.CreateIndex(ctx, notes); err != nil {
			t.Fatal(err)
		}
		waitBuilt(t, s, "notes")
		res, err := s.Search(ctx, "notes", partmap.SearchOptions{Query: "@notes:{gold}", NoContent: true})
		if err != nil || res.Total != 0 {
			t.Errorf("@notes:{gold}: total %d, %d hits, %v", res.Total, len(res.Hits), err)
		}
		if err := s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			if !c.OK() {
				return fmt.Errorf("partition %d: %d drifts, first %+v", c.Partition, len(c.Drift), c.Drift[0])
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
}

// An index dropped twice under one name, the second time while the first
// drop's entries are being removed, is cleaned both times: a resize, which
// waits for the cleanings, can start.
func runSearchIndexDroppedTwice(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchIndexDroppedTwice", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		for range 2 {
			if err := s.CreateIndex(ctx, deskIndex); err != nil {
				t.Fatal(err)
			}
			if err := s.DropIndex(ctx, "desk"); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := s.Resize(ctx, 16)
			if err == nil {
				return
			}
			if partmap.ErrorCode(err) != partmap.ECONFLICT || time.Now().After(deadline) {
				t.Fatalf("resize: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// An exclusive infinite bound leaves out the profiles whose value is that
// infinity, in the total too, as search.Match does.
func runSearchExclusiveInfinity(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchExclusiveInfinity", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		waitBuilt(t, s, "desk")
		for _, p := range []partmap.Profile{
			{partmap.FieldEmail: "low@example.com", "visits": "-inf"},
			{partmap.FieldEmail: "high@example.com", "visits": "+inf"},
			{partmap.FieldEmail: "one@example.com", "visits": "1"},
		} {
			if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		for q, want := range map[string][]string{
			"@visits:[(-inf +inf]":  {"high@example.com", "one@example.com"},
			"@visits:[-inf (+inf]":  {"low@example.com", "one@example.com"},
			"@visits:[(-inf (+inf]": {"one@example.com"},
			"@visits:[-inf +inf]":   {"high@example.com", "low@example.com", "one@example.com"},
		} {
			res, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: q, NoContent: true})
			got := hitEmails(res)
			slices.Sort(got)
			if err != nil || !slices.Equal(got, want) || res.Total != int64(len(want)) {
				t.Errorf("%s: %v (total %d) %v, want %v", q, got, res.Total, err, want)
			}
		}
	})
}

// An offset near the largest int is refused, not added up past it.
func runSearchHugeOffset(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchHugeOffset", func(t *testing.T) {
		ctx := context.Background()
		s := started(t)
		if err := s.CreateIndex(ctx, deskIndex); err != nil {
			t.Fatal(err)
		}
		waitBuilt(t, s, "desk")
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "one@example.com", "visits": "1"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		for _, sortBy := range []string{"", "visits"} {
			_, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: "*", SortBy: sortBy, Offset: math.MaxInt - 5, Limit: 10})
			if partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("SORTBY %q LIMIT %d 10: %v", sortBy, math.MaxInt-5, err)
			}
		}
	})
}
