package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/partmap/partmap"
)

func emailsOf(recs []partmap.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Profile.Email()
	}
	return out
}

func runSearch(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	where := func(kv ...string) []partmap.Match {
		var out []partmap.Match
		for i := 0; i < len(kv); i += 2 {
			out = append(out, partmap.Match{Field: kv[i], Value: kv[i+1]})
		}
		return out
	}

	t.Run("SearchRefusesFieldsThatAreNotIndexed", func(t *testing.T) {
		s := started(t)
		stats, err := s.ListPartitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bad := [][]partmap.Match{where("fullName", "Ada")}
		if len(stats.Indexes) > 0 {
			bad = append(bad, where(stats.Indexes[0], "a", stats.Indexes[0], "b"))
		}
		for _, w := range bad {
			if _, err := s.ListProfiles(ctx, partmap.ListOptions{Where: w}); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("search %v: got %v, want invalid", w, err)
			}
		}
	})

	probe := started(t)
	stats, err := probe.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	indexed := len(stats.Indexes) > 0
	if !indexed {
		// A store without indexes (the bucket baseline) only has to refuse
		// searches and count right.
		t.Run("CheckFindsNoDrift", func(t *testing.T) { runCheck(t, started, false) })
		return
	}

	t.Run("Search", func(t *testing.T) {
		s := started(t)
		stats, err := s.ListPartitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(stats.Indexes, partmap.DefaultIndexes) {
			t.Fatalf("a new directory indexes %v, want %v", stats.Indexes, partmap.DefaultIndexes)
		}
		companies := []string{"Acme Corp", "Globex", "", "Ünïcode & Co"}
		tiers := []string{"gold", "silver"}
		var profiles []partmap.Profile
		for i := range 40 {
			p := partmap.Profile{partmap.FieldEmail: fmt.Sprintf("s%02d@example.com", i), "fullName": "x"}
			if i%5 != 4 { // some have no company at all
				p["companyName"] = companies[i%len(companies)]
			}
			p["customerTier"] = tiers[i%len(tiers)]
			profiles = append(profiles, p)
		}
		// Half through the bulk path, half one by one: both index.
		MustUpsert(t, s, profiles[:20])
		for _, p := range profiles[20:] {
			if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		var all []partmap.Record // every profile, listed again after writes (nil)
		brute := func(w []partmap.Match) []string {
			if all == nil {
				all = listAll(t, s, 100)
			}
			var out []string
			for _, rec := range all {
				if matchesAll(rec.Profile, w) {
					out = append(out, rec.Profile.Email())
				}
			}
			return out
		}
		check := func(w []partmap.Match) {
			t.Helper()
			want := brute(w)
			for _, limit := range []int{1, 3, 100} {
				if got := emailsOf(listWhere(t, s, limit, w, true)); !slices.Equal(got, want) {
					t.Fatalf("search %v (pages of %d): got %v, want %v", w, limit, got, want)
				}
			}
		}
		for _, w := range [][]partmap.Match{
			where("companyName", "Acme Corp"), where("companyName", ""), where("companyName", "Ünïcode & Co"),
			where("customerTier", "gold"), where("companyName", "Acme Corp", "customerTier", "gold"),
			where("customerTier", "gold", "companyName", "Globex"), where("companyName", "Acme"), where("customerTier", "GOLD"),
		} {
			check(w)
		}
		if got := emailsOf(listWhere(t, s, 100, where("companyName", "Acme Corp", "customerTier", "gold"), true)); len(got) == 0 {
			t.Fatal("the AND search found nothing; the test data should match")
		}

		// Writes move profiles in and out of results.
		all = nil
		e := "s00@example.com" // Acme Corp, gold
		if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"customerTier": ptr("silver")}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(emailsOf(listWhere(t, s, 100, where("customerTier", "gold"), true)), e) {
			t.Fatal("a patched profile is still found by its old value")
		}
		if !slices.Contains(emailsOf(listWhere(t, s, 100, where("customerTier", "silver"), true)), e) {
			t.Fatal("a patched profile is not found by its new value")
		}
		if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"companyName": nil}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := partmap.IncrementField(ctx, s, "s04@example.com", "companyName", 5, partmap.Condition{}); err != nil {
			t.Fatal(err) // s04 has no company: it starts from 0
		}
		for _, w := range [][]partmap.Match{where("companyName", "Acme Corp"), where("companyName", "5"), where("customerTier", "silver")} {
			check(w)
		}
		if got := emailsOf(listWhere(t, s, 100, where("companyName", "5"), true)); !slices.Equal(got, []string{"s04@example.com"}) {
			t.Fatalf("companyName=5 after an increment: %v", got)
		}
	})

	t.Run("SearchFollowsWrites", func(t *testing.T) {
		s := started(t)
		put := func(e, company string) {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "companyName": company}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		put("a@example.com", "Acme")
		put("b@example.com", "Acme")
		put("c@example.com", "Initech")
		if _, err := partmap.IncrementField(ctx, s, "c@example.com", "customerTier", 3, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if err := partmap.DeleteProfile(ctx, s, "b@example.com", partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		put("a@example.com", "Initech") // a replacement reindexes
		for w, want := range map[string][]string{
			"Acme":    nil,
			"Initech": emailsOf(listWhere(t, s, 100, where("companyName", "Initech"), true)),
		} {
			if got := emailsOf(listWhere(t, s, 100, where("companyName", w), true)); !slices.Equal(got, want) || (w == "Initech" && len(got) != 2) {
				t.Fatalf("companyName=%s: %v", w, got)
			}
		}
		if got := emailsOf(listWhere(t, s, 100, where("customerTier", "3"), true)); !slices.Equal(got, []string{"c@example.com"}) {
			t.Fatalf("customerTier=3 after an increment: %v", got)
		}
	})

	t.Run("SearchCursorIsBound", func(t *testing.T) {
		s := started(t)
		for i := range 4 {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("k%d@example.com", i), "customerTier": "gold"}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		page, err := s.ListProfiles(ctx, partmap.ListOptions{Limit: 1, Where: where("customerTier", "gold")})
		if err != nil || page.NextCursor == "" {
			t.Fatalf("first page: %v %v", page, err)
		}
		for _, w := range [][]partmap.Match{nil, where("customerTier", "silver"), where("companyName", "gold")} {
			if _, err := s.ListProfiles(ctx, partmap.ListOptions{Limit: 1, Cursor: page.NextCursor, Where: w}); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("a gold search's cursor with %v: got %v, want invalid", w, err)
			}
		}
	})

	t.Run("CheckFindsNoDrift", func(t *testing.T) { runCheck(t, started, true) })
}

func runCheck(t *testing.T, started func(*testing.T) partmap.Store, indexed bool) {
	ctx := context.Background()
	{
		s := started(t)
		emails, p := Colliding(6, partmap.DefaultPartitions, "chk")
		for i, e := range emails {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "companyName": fmt.Sprint("c", i%2), "customerTier": "gold"}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		partmap.DeleteProfile(ctx, s, emails[0], partmap.Condition{})
		partmap.PatchProfile(ctx, s, emails[1], partmap.Patch{"customerTier": nil}, partmap.Condition{})
		c, err := s.CheckPartition(ctx, p)
		entries := int64(9)
		if !indexed {
			entries = 0
		}
		if err != nil || !c.OK() || c.Profiles != 5 || c.Counted != 5 || c.IndexEntries != entries {
			t.Fatalf("check %s: %+v %v", p, c, err)
		}
		if c, err := s.CheckPartition(ctx, (p+1)%partmap.DefaultPartitions); err != nil || !c.OK() {
			t.Fatalf("check of another partition: %+v %v", c, err)
		}
		for _, bad := range []partmap.Partition{partmap.DefaultPartitions, 1 << 31} {
			if _, err := s.CheckPartition(ctx, bad); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("check of %d: got %v, want invalid", bad, err)
			}
		}

		// A range is checked in one call, in order, each partition once;
		// end 0 is the whole map.
		first, end := p-min(p, 2), min(p+3, partmap.DefaultPartitions)
		var got []partmap.PartitionCheck
		if err := s.CheckPartitions(ctx, first, end, func(c partmap.PartitionCheck) error { got = append(got, c); return nil }); err != nil {
			t.Fatal(err)
		}
		for i, c := range got {
			if c.Partition != first+partmap.Partition(i) || !c.OK() || (c.Partition == p) != (c.Profiles == 5) {
				t.Fatalf("range check %d up to %d: %+v", first, end, got)
			}
		}
		if len(got) != int(end-first) {
			t.Fatalf("range check %d up to %d: %d partitions checked", first, end, len(got))
		}
		n := 0
		if err := s.CheckPartitions(ctx, 0, 0, func(partmap.PartitionCheck) error { n++; return nil }); err != nil || n != partmap.DefaultPartitions {
			t.Fatalf("whole-map check: %d partitions, %v", n, err)
		}
		stop := errors.New("enough")
		n = 0
		if err := s.CheckPartitions(ctx, 0, 0, func(partmap.PartitionCheck) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
			t.Fatalf("a check whose fn fails: %d partitions, %v", n, err)
		}
		for _, r := range [][2]partmap.Partition{{5, 5}, {5, 3}, {0, partmap.DefaultPartitions + 1}, {partmap.DefaultPartitions, 0}} {
			if err := s.CheckPartitions(ctx, r[0], r[1], func(partmap.PartitionCheck) error { return nil }); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("check of %d up to %d: got %v, want invalid", r[0], r[1], err)
			}
		}
	}
}

func runSearchInput(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("SearchRefusesValuesNoProfileHolds", func(t *testing.T) {
		s := started(t)
		for _, w := range []partmap.Match{{Field: "companyName", Value: "\xff"}, {Field: "\xff", Value: "x"}} {
			_, err := s.ListProfiles(context.Background(), partmap.ListOptions{Where: []partmap.Match{w}})
			if code := partmap.ErrorCode(err); code != partmap.EINVALIDUTF8 {
				t.Errorf("search %q=%q: got %v, want invalid-utf8", w.Field, w.Value, err)
			}
		}
	})
}
