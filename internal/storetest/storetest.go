// Package storetest is the conformance suite every partmap.Store passes: the
// embedded store, Redis and Redis Cluster, the HTTP client in front of a
// server, and any later backend; RunEngine holds each backend (pebble,
// redis) to the engine's rules. A behaviour is specified once here, not
// once per backend.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// Opener returns a new, empty store, closed when the test ends.
type Opener func(t *testing.T) partmap.Store

// Colliding returns n distinct canonical emails that share one partition
// among partitions, found by search so that tests do not hard-code hashes.
func Colliding(n, partitions int, prefix string) ([]string, partmap.Partition) {
	var want partmap.Partition
	var out []string
	for i := 0; len(out) < n; i++ {
		email := fmt.Sprintf("%s%d@example.com", prefix, i)
		p := partmap.PartitionOf(email, partitions)
		if len(out) == 0 {
			want = p
		}
		if p == want {
			out = append(out, email)
		}
	}
	return out, want
}

// startedBy returns open with the store started.
func startedBy(open Opener) func(*testing.T) partmap.Store {
	return func(t *testing.T) partmap.Store {
		s := open(t)
		if _, err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// RunStore runs the Store conformance suite.
func RunStore(t *testing.T, open Opener) {
	ctx := context.Background()
	started := startedBy(open)

	runFields(t, started)
	runList(t, started)
	runBulk(t, started)
	runBatch(t, open, started)
	runRenameRaces(t, started)
	runExport(t, open, started)
	runSearch(t, started)
	runSearchInput(t, started)
	runWholeMapLock(t, started)
	runTransactions(t, started)
	runDoorOperations(t, started)
	runCopyAndReplace(t, started)
	runExpiryReplies(t, started)

	t.Run("Start", func(t *testing.T) {
		s := open(t)
		_, err := s.FindProfile(ctx, "alice@example.com")
		if !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("find before start: got %v, want not-started", err)
		}
		_, _, err = partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "alice@example.com"}, partmap.Condition{})
		if !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("upsert before start: got %v, want not-started", err)
		}
		if _, err := s.ListProfiles(ctx, partmap.ListOptions{}); !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("list before start: got %v, want not-started", err)
		}
		if _, err := s.ListPartitions(ctx); !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("partitions before start: got %v, want not-started", err)
		}
		if _, err := s.UpsertProfiles(ctx, []partmap.Profile{{partmap.FieldEmail: "a@b"}}); !errors.Is(err, partmap.ErrNotStarted) {
			t.Fatalf("bulk before start: got %v, want not-started", err)
		}
		for i, want := range []bool{true, false, false} {
			got, err := s.Start(ctx)
			if err != nil || got != want {
				t.Fatalf("start #%d: got %v, %v; want %v, nil", i+1, got, err, want)
			}
		}
		if _, err := s.FindProfile(ctx, "alice@example.com"); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("find after start: got %v, want not-found", err)
		}
	})

	t.Run("UpsertAndFind", func(t *testing.T) {
		s := started(t)
		in := partmap.Profile{
			partmap.FieldEmail: " Alice@Example.COM ", partmap.FieldFullName: "Alice Liddell",
			partmap.FieldCompanyName: "Acme <&> Corp", partmap.FieldCustomerTier: "",
			"name.first": "Alice", "emoji": "A中🙂", "nfd": "e\u0301", "bom": "\ufeffx",
		}
		rec, created, err := partmap.UpsertProfile(ctx, s, in, partmap.Condition{})
		if err != nil || !created {
			t.Fatalf("first upsert: created=%v err=%v", created, err)
		}
		want := in.Clone()
		want[partmap.FieldEmail] = "alice@example.com"
		assertProfile(t, rec.Profile, want)
		if in[partmap.FieldEmail] != " Alice@Example.COM " {
			t.Fatal("upsert modified the caller's profile")
		}
		got, err := s.FindProfile(ctx, "ALICE@example.com\t")
		if err != nil {
			t.Fatal(err)
		}
		assertProfile(t, got.Profile, want)
		if got.Version != rec.Version || rec.Version == 0 {
			t.Fatalf("versions: find %v, upsert %v", got.Version, rec.Version)
		}

		// A replace is a success, reports created=false, drops unnamed fields
		// and gives a new version.
		rec2, created, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "alice@example.com", "fullName": "Alice L"}, partmap.Condition{})
		if err != nil || created {
			t.Fatalf("replace: created=%v err=%v", created, err)
		}
		if rec2.Version == rec.Version {
			t.Fatal("a write kept the old version")
		}
		got, _ = s.FindProfile(ctx, "alice@example.com")
		assertProfile(t, got.Profile, partmap.Profile{partmap.FieldEmail: "alice@example.com", "fullName": "Alice L"})
	})

	t.Run("NotFound", func(t *testing.T) {
		s := started(t)
		emails, _ := Colliding(2, partmap.DefaultPartitions, "nf")
		if _, err := s.FindProfile(ctx, emails[0]); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("missing partition: got %v, want not-found", err)
		}
		put(t, s, emails[0], "x")
		if _, err := s.FindProfile(ctx, emails[1]); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("missing email in an existing partition: got %v, want not-found", err)
		}
	})

	t.Run("CollisionsStayApart", func(t *testing.T) {
		s := started(t)
		emails, _ := Colliding(5, partmap.DefaultPartitions, "col")
		for _, e := range emails {
			put(t, s, e, "name of "+e)
		}
		for _, e := range emails {
			rec, err := s.FindProfile(ctx, e)
			if err != nil || rec.Profile["fullName"] != "name of "+e {
				t.Fatalf("%s: got %v, %v", e, rec.Profile, err)
			}
		}
	})

	t.Run("BadInputWritesNothing", func(t *testing.T) {
		s := started(t)
		l := partmap.DefaultLimits
		const email = "bad@example.com"
		with := func(name, value string) partmap.Profile {
			return partmap.Profile{partmap.FieldEmail: email, name: value}
		}
		many := partmap.Profile{partmap.FieldEmail: email}
		for i := range l.MaxFields {
			many[fmt.Sprintf("f%d", i)] = "v"
		}
		big := partmap.Profile{partmap.FieldEmail: email}
		for i := 0; i*l.MaxFieldValueBytes <= l.MaxProfileBytes; i++ {
			big[fmt.Sprintf("f%d", i)] = strings.Repeat("x", l.MaxFieldValueBytes)
		}
		for _, tc := range []struct {
			name    string
			profile partmap.Profile
			code    partmap.Code
		}{
			{"ErrNoEmail", partmap.Profile{"fullName": "x"}, partmap.EINVALIDEMAIL},
			{"ErrBlankEmail", partmap.Profile{partmap.FieldEmail: " \t\r\n\v\f"}, partmap.EINVALIDEMAIL},
			{"ErrNonASCIIEmail", partmap.Profile{partmap.FieldEmail: "bäd@example.com"}, partmap.EINVALIDEMAIL},
			{"ErrLongEmail", partmap.Profile{partmap.FieldEmail: strings.Repeat("a", partmap.MaxEmailBytes) + "@x"}, partmap.ETOOLARGE},
			{"ErrInvalidUTF8Value", with("fullName", "ab\xffcd"), partmap.EINVALIDUTF8},
			{"ErrSurrogateValue", with("fullName", "\xed\xa0\x80"), partmap.EINVALIDUTF8},
			{"ErrOverlongValue", with("fullName", "\xc0\xaf"), partmap.EINVALIDUTF8},
			{"ErrTruncatedValue", with("fullName", "\xe4\xb8"), partmap.EINVALIDUTF8},
			{"ErrInvalidUTF8Name", with("na\xffme", "x"), partmap.EINVALIDUTF8},
			{"ErrEmptyName", with("", "x"), partmap.EINVALID},
			{"ErrLongName", with(strings.Repeat("n", l.MaxFieldNameBytes+1), "x"), partmap.ETOOLARGE},
			{"ErrLongValue", with("fullName", strings.Repeat("v", l.MaxFieldValueBytes+1)), partmap.ETOOLARGE},
			{"ErrTooManyFields", many, partmap.ETOOMANYFIELDS},
			{"ErrProfileTooLarge", big, partmap.ETOOLARGE},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := partmap.UpsertProfile(ctx, s, tc.profile, partmap.Condition{})
				if got := partmap.ErrorCode(err); got != tc.code {
					t.Fatalf("got %v (%v), want %s", got, err, tc.code)
				}
				if _, err := s.FindProfile(ctx, email); !errors.Is(err, partmap.ErrNotFound) {
					t.Fatalf("after a refused write: got %v, want not-found", err)
				}
			})
		}
		t.Run("OKAtTheLimits", func(t *testing.T) {
			p := with(strings.Repeat("n", l.MaxFieldNameBytes), strings.Repeat("é", l.MaxFieldValueBytes/2))
			if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		})
	})

	// A profile of as many fields as the limits allow, and exactly as
	// many bytes, is stored and read back whole; a field or a byte more
	// is refused and writes nothing.
	t.Run("OKAtTheFieldAndByteLimits", func(t *testing.T) {
		s := started(t)
		l := partmap.DefaultLimits
		const email = "full@example.com"
		p := partmap.Profile{partmap.FieldEmail: email}
		room := l.MaxProfileBytes - len(partmap.FieldEmail) - len(email)
		for i := 1; i < l.MaxFields; i++ {
			name := fmt.Sprintf("field%05d", i)
			share := room / (l.MaxFields - i) // what is left, spread over the fields left
			p[name] = strings.Repeat("v", share-len(name))
			room -= share
		}
		if err := l.CheckProfile(p); err != nil || len(p) != l.MaxFields || room != 0 {
			t.Fatalf("the profile at the limits: %d fields, %d bytes short: %v", len(p), room, err)
		}
		rec := putProfile(t, s, p)
		assertProfile(t, mustFind(t, s, email).Profile, p)
		for _, tc := range []struct {
			name  string
			patch partmap.Patch
			code  partmap.Code
		}{
			{"ErrOneFieldMore", partmap.Patch{"x": ptr("")}, partmap.ETOOMANYFIELDS},
			{"ErrOneByteMore", partmap.Patch{"field00001": ptr(p["field00001"] + "v")}, partmap.ETOOLARGE},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := partmap.PatchProfile(ctx, s, email, tc.patch, partmap.Condition{})
				if partmap.ErrorCode(err) != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				wantVersion(t, s, email, rec.Version, true)
			})
		}
	})

	t.Run("Conditions", func(t *testing.T) {
		s := started(t)
		const email = "cond@example.com"
		p := partmap.Profile{partmap.FieldEmail: email, "fullName": "v1"}
		if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.IfMatch(42)); !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("If-Match on a missing profile: got %v", err)
		}
		rec, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{IfNoneMatch: true})
		if err != nil {
			t.Fatalf("create-only of a new profile: %v", err)
		}
		if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{IfNoneMatch: true}); !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("create-only of an existing profile: got %v", err)
		}
		p2 := partmap.Profile{partmap.FieldEmail: email, "fullName": "v2"}
		if _, _, err := partmap.UpsertProfile(ctx, s, p2, partmap.IfMatch(rec.Version+1)); !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("If-Match with a stale version: got %v", err)
		}
		if got, _ := s.FindProfile(ctx, email); got.Profile["fullName"] != "v1" {
			t.Fatalf("a failed precondition wrote: %v", got.Profile)
		}
		if _, _, err := partmap.UpsertProfile(ctx, s, p2, partmap.IfMatch(rec.Version)); err != nil {
			t.Fatalf("If-Match with the current version: %v", err)
		}
	})

	t.Run("ConcurrentUpsertsOnePartition", func(t *testing.T) {
		s := started(t)
		emails, _ := Colliding(64, partmap.DefaultPartitions, "hot")
		var wg sync.WaitGroup
		errs := make(chan error, len(emails))
		for i, e := range emails {
			wg.Go(func() {
				p := partmap.Profile{partmap.FieldEmail: e, "fullName": fmt.Sprintf("client %d", i)}
				errs <- retry(func() error { _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); return err })
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for i, e := range emails {
			rec, err := s.FindProfile(ctx, e)
			if err != nil || rec.Profile["fullName"] != fmt.Sprintf("client %d", i) {
				t.Fatalf("%s: got %v, %v", e, rec.Profile, err)
			}
		}
	})

	t.Run("IfMatchRace", func(t *testing.T) {
		s := started(t)
		const email = "race@example.com"
		rec := put(t, s, email, "v0")
		exactlyOneWins(t, func(i int) error {
			p := partmap.Profile{partmap.FieldEmail: email, "fullName": fmt.Sprintf("w%d", i)}
			_, _, err := partmap.UpsertProfile(ctx, s, p, partmap.IfMatch(rec.Version))
			return err
		})
	})
}

// exactlyOneWins runs 16 concurrent conditional writes that all require the
// same version, retrying lock conflicts: exactly one may succeed, and every
// other must fail its precondition.
func exactlyOneWins(t *testing.T, write func(i int) error) {
	t.Helper()
	const writers = 16
	var wg sync.WaitGroup
	results := make(chan error, writers)
	for i := range writers {
		wg.Go(func() { results <- retry(func() error { return write(i) }) })
	}
	wg.Wait()
	close(results)
	wins := 0
	for err := range results {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, partmap.ErrPrecondition):
			t.Fatal(err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d of %d writers with the same If-Match succeeded; want exactly 1", wins, writers)
	}
}

// retry repeats an idempotent write while it meets lock conflicts.
func retry(write func() error) error {
	for {
		err := write()
		if !errors.Is(err, partmap.ErrLockConflict) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

func put(t *testing.T, s partmap.Store, email, name string) partmap.Record {
	t.Helper()
	rec, _, err := partmap.UpsertProfile(context.Background(), s, partmap.Profile{partmap.FieldEmail: email, "fullName": name}, partmap.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func assertProfile(t *testing.T, got, want partmap.Profile) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d fields %q, want %d fields %q", len(got), got, len(want), want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("field %q: got %q (present %v), want %q", k, g, ok, v)
		}
	}
}
