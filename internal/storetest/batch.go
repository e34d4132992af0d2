package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/partmap/partmap"
)

// runBatch checks batch lookups: answers in the order asked with nil for a
// missing profile, the versions a single lookup gives, projections, the
// input refused as a whole, and reads that run while writers write.
func runBatch(t *testing.T, open Opener, started func(*testing.T) partmap.Store) {
	ctx := context.Background()

	t.Run("BatchNotStarted", func(t *testing.T) {
		s := open(t)
		if _, err := s.FindProfiles(ctx, []string{"a@example.com"}); !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("batch lookup before start: got %v, want not-started", err)
		}
		if _, err := s.ProjectProfiles(ctx, []string{"a@example.com"}, []string{"fullName"}); !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("batch projection before start: got %v, want not-started", err)
		}
	})

	t.Run("BatchFind", func(t *testing.T) {
		s := started(t)
		// Three profiles in one partition and a fourth that shares it but
		// does not exist, others spread out, and a missing partition.
		same, _ := Colliding(4, partmap.DefaultPartitions, "batch")
		want := map[string]partmap.Record{}
		for _, e := range same[:3] {
			want[e] = put(t, s, e, "Same "+e)
		}
		for i := range 20 {
			e := fmt.Sprintf("spread%d@example.com", i)
			want[e] = put(t, s, e, "Spread "+e)
		}
		used := map[string]bool{}
		for e := range want {
			used[partitionOf(e)] = true
		}
		var ghost string
		for i := 0; ghost == ""; i++ { // an email whose partition holds nothing
			if e := fmt.Sprintf("ghost%d@example.com", i); !used[partitionOf(e)] {
				ghost = e
			}
		}
		ask := []string{" " + strings.ToUpper(same[1]) + "\t", "spread7@example.com", same[3], ghost, same[0], same[1], "spread19@example.com", same[2]}
		wantAt := []string{same[1], "spread7@example.com", "", "", same[0], same[1], "spread19@example.com", same[2]}
		got, err := s.FindProfiles(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ask) {
			t.Fatalf("got %d answers for %d emails", len(got), len(ask))
		}
		for i, e := range wantAt {
			switch {
			case e == "" && got[i] != nil:
				t.Fatalf("answer %d (%q): got %v, want nil for a missing profile", i, ask[i], got[i].Profile)
			case e == "":
			case got[i] == nil:
				t.Fatalf("answer %d (%q): nil, want %s's profile", i, ask[i], e)
			default:
				assertProfile(t, got[i].Profile, want[e].Profile)
				if got[i].Version != want[e].Version {
					t.Fatalf("answer %d (%q): version %v, want %v as the upsert gave", i, ask[i], got[i].Version, want[e].Version)
				}
			}
		}
		// A lookup creates nothing, not even for the missing ones.
		if _, err := s.FindProfile(ctx, same[3]); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("the batch created %s: %v", same[3], err)
		}
		stats, err := s.ListPartitions(ctx)
		if err != nil || stats.TotalProfiles != int64(len(want)) {
			t.Fatalf("after the batch: %d profiles, %v; want %d", stats.TotalProfiles, err, len(want))
		}

		// The limit is a thousand, whatever they are.
		many := make([]string, partmap.MaxBatchEmails)
		for i := range many {
			many[i] = fmt.Sprintf("spread%d@example.com", i%40)
		}
		got, err = s.FindProfiles(ctx, many)
		if err != nil || len(got) != len(many) {
			t.Fatalf("a batch of %d: %d answers, %v", len(many), len(got), err)
		}
		for i, rec := range got {
			if exists := i%40 < 20; exists != (rec != nil) {
				t.Fatalf("a batch of %d: answer %d (%s) is %v", len(many), i, many[i], rec)
			}
		}
	})

	t.Run("BatchProject", func(t *testing.T) {
		s := started(t)
		rec, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "p@example.com", "fullName": "P", "empty": "", "a,b": "comma"}, partmap.Condition{})
		if err != nil {
			t.Fatal(err)
		}
		fields := []string{"empty", "missing", "a,b", "fullName"}
		got, err := s.ProjectProfiles(ctx, []string{"nobody@example.com", "P@example.com"}, fields)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != nil || got[1] == nil {
			t.Fatalf("got %v, want nil then a projection", got)
		}
		p := got[1]
		wantValues := []*string{ptr(""), nil, ptr("comma"), ptr("P")}
		if strings.Join(p.Fields, "|") != strings.Join(fields, "|") || p.Version != rec.Version {
			t.Fatalf("fields %q version %v, want %q and %v", p.Fields, p.Version, fields, rec.Version)
		}
		for i, w := range wantValues {
			if g := p.Values[i]; (g == nil) != (w == nil) || (g != nil && *g != *w) {
				t.Fatalf("field %q: got %v, want %v", fields[i], show(g), show(w))
			}
		}
	})

	t.Run("BatchRefused", func(t *testing.T) {
		s := started(t)
		put(t, s, "ok@example.com", "OK")
		tooMany := make([]string, partmap.MaxBatchEmails+1)
		for i := range tooMany {
			tooMany[i] = "ok@example.com"
		}
		long := strings.Repeat("a", partmap.MaxEmailBytes) + "@x"
		for _, tc := range []struct {
			name   string
			emails []string
			fields []string // nil: FindProfiles
			code   partmap.Code
			says   string // the message names the item
		}{
			{"ErrNoEmails", nil, nil, partmap.EINVALID, "at least one email"},
			{"ErrEmptyList", []string{}, nil, partmap.EINVALID, "at least one email"},
			{"ErrTooMany", tooMany, nil, partmap.EINVALID, "1001 emails"},
			{"ErrTooManyProjected", tooMany, []string{"fullName"}, partmap.EINVALID, "1001 emails"},
			{"ErrBlankEmail", []string{"ok@example.com", "ok@example.com", " \t"}, nil, partmap.EINVALIDEMAIL, `emails[2] " \t"`},
			{"ErrNotASCII", []string{"ok@example.com", "vïctim@example.com"}, nil, partmap.EINVALIDEMAIL, `emails[1] "v\u00efctim@example.com"`},
			{"ErrLongEmail", []string{long}, nil, partmap.ETOOLARGE, "emails[0]"},
			{"ErrBadEmailProjected", []string{"ok@example.com", ""}, []string{"fullName"}, partmap.EINVALIDEMAIL, `emails[1] ""`},
			{"ErrNoFields", []string{"ok@example.com"}, []string{}, partmap.EINVALID, "fields is empty"},
			{"ErrRepeatedField", []string{"ok@example.com"}, []string{"a", "b", "a"}, partmap.EINVALID, `fields[2] "a"`},
			{"ErrEmptyField", []string{"ok@example.com"}, []string{"a", ""}, partmap.EINVALID, "fields[1]"},
			{"ErrFieldNotUTF8", []string{"ok@example.com"}, []string{"a", "\xff"}, partmap.EINVALIDUTF8, "fields[1]"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var err error
				var n int
				if tc.fields == nil {
					var got []*partmap.Record
					got, err = s.FindProfiles(ctx, tc.emails)
					n = len(got)
				} else {
					var got []*partmap.Projection
					got, err = s.ProjectProfiles(ctx, tc.emails, tc.fields)
					n = len(got)
				}
				if partmap.ErrorCode(err) != tc.code || !strings.Contains(partmap.ErrorMessage(err), tc.says) {
					t.Fatalf("got %v, want %s naming %s", err, tc.code, tc.says)
				}
				if n != 0 {
					t.Fatalf("a refused batch answered %d profiles", n)
				}
			})
		}
	})

	// Batch lookups while writers rewrite the profiles they read: every
	// profile a lookup returns is one a writer wrote, with the version that
	// write gave it, and the profiles of one partition, written together,
	// are read together.
	t.Run("BatchWhileWriting", func(t *testing.T) {
		s := started(t)
		const writers, rounds, readers = 4, 25, 3
		var (
			mu      sync.Mutex
			written = map[partmap.Version]partmap.Profile{}
		)
		// write upserts both emails of a pair in one bulk call, which
		// commits them atomically since they share a partition, retrying
		// lock conflicts.
		write := func(pair []string, round int) error {
			profiles := []partmap.Profile{
				{partmap.FieldEmail: pair[0], "round": strconv.Itoa(round)},
				{partmap.FieldEmail: pair[1], "round": strconv.Itoa(round)},
			}
			for {
				res, err := s.UpsertProfiles(ctx, profiles)
				if err != nil {
					return err
				}
				if errors.Is(res[0].Err, partmap.ErrLockConflict) && errors.Is(res[1].Err, partmap.ErrLockConflict) {
					continue
				}
				mu.Lock()
				for i, r := range res {
					if r.Err != nil {
						mu.Unlock()
						return fmt.Errorf("%s: %w", pair[i], r.Err)
					}
					written[r.Record.Version] = r.Record.Profile
				}
				mu.Unlock()
				return nil
			}
		}
		var pairs [][]string
		var all []string
		for w := range writers {
			pair, _ := Colliding(2, partmap.DefaultPartitions, fmt.Sprintf("rw%d-", w))
			if err := write(pair, 0); err != nil {
				t.Fatal(err)
			}
			pairs = append(pairs, pair)
			all = append(all, pair...)
		}

		done := make(chan struct{})
		var reads [][]*partmap.Record
		var readMu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, writers+readers)
		for r := range readers {
			wg.Go(func() {
				// At least one lookup, then more until the writers are done.
				for first := true; ; first = false {
					select {
					case <-done:
						if !first {
							return
						}
					default:
					}
					got, err := s.FindProfiles(ctx, all)
					if err != nil {
						errs <- fmt.Errorf("reader %d: %w", r, err)
						return
					}
					readMu.Lock()
					reads = append(reads, got)
					readMu.Unlock()
				}
			})
		}
		var writersWG sync.WaitGroup
		for w, pair := range pairs {
			writersWG.Go(func() {
				for round := 1; round <= rounds; round++ {
					if err := write(pair, round); err != nil {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
				}
			})
		}
		writersWG.Wait()
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(reads) < readers {
			t.Fatalf("%d lookups, want at least %d", len(reads), readers)
		}
		for n, got := range reads {
			if len(got) != len(all) {
				t.Fatalf("lookup %d: %d answers for %d emails", n, len(got), len(all))
			}
			for i, rec := range got {
				if rec == nil {
					t.Fatalf("lookup %d: %s is missing, but was written before the lookups began", n, all[i])
				}
				w, ok := written[rec.Version]
				if !ok || !maps.Equal(w, rec.Profile) {
					t.Fatalf("lookup %d: %s is %v at version %v, which no writer wrote (that version holds %v)", n, all[i], rec.Profile, rec.Version, w)
				}
			}
			for i := 0; i < len(got); i += 2 {
				if a, b := got[i].Profile["round"], got[i+1].Profile["round"]; a != b {
					t.Fatalf("lookup %d: %s is at round %s but %s, in the same partition and written with it, at %s", n, all[i], a, all[i+1], b)
				}
			}
		}
	})
}
