package pgtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
)

// Companies and Tiers are the values Workload writes to the indexed
// fields companyName and customerTier.
var (
	Companies = []string{"Acme", "Globex", "Initech", "Umbrella", "Stark & Sons", "Ünïcode \"Ltd\""}
	Tiers     = []string{"gold", "silver", "bronze"}
)

// Email is the i-th address a Workload writes.
func Email(i int) string { return fmt.Sprintf("user%d@example.com", i) }

// Workload runs n random writes on Email(0) to Email(emails-1): upserts,
// patches, increments, deletes and renames. Misses and lock conflicts are
// part of the game.
func Workload(t testing.TB, s partmap.Store, rng *rand.Rand, emails, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		a, b := Email(rng.IntN(emails)), Email(rng.IntN(emails))
		var err error
		switch k := rng.IntN(100); {
		case k < 40:
			p := partmap.Profile{partmap.FieldEmail: a, partmap.FieldCompanyName: Companies[rng.IntN(len(Companies))],
				partmap.FieldCustomerTier: Tiers[rng.IntN(len(Tiers))]}
			if rng.IntN(2) == 0 {
				p[partmap.FieldFullName] = "User " + strconv.Itoa(rng.IntN(1000))
			}
			_, _, err = partmap.UpsertProfile(ctx, s, p, partmap.Condition{})
		case k < 60:
			tier := Tiers[rng.IntN(len(Tiers))]
			patch := partmap.Patch{partmap.FieldCustomerTier: &tier}
			if rng.IntN(3) == 0 {
				patch[partmap.FieldCompanyName] = nil
			}
			_, err = partmap.PatchProfile(ctx, s, a, patch, partmap.Condition{})
		case k < 75:
			_, err = partmap.IncrementField(ctx, s, a, "visits", int64(rng.IntN(5)+1), partmap.Condition{})
		case k < 87:
			err = partmap.DeleteProfile(ctx, s, a, partmap.Condition{})
		default:
			_, err = partmap.RenameProfile(ctx, s, a, b, partmap.Condition{})
		}
		switch partmap.ErrorCode(err) {
		case "", partmap.ENOTFOUND, partmap.EEXISTS, partmap.EINVALID, partmap.ELOCKCONFLICT:
		default:
			t.Errorf("workload: %v", err)
			return
		}
	}
}

// SavedCursor reads the committed cursor of a projected table ("" when
// none).
func SavedCursor(pool *pgxpool.Pool, table string) string {
	var c *string
	err := pool.QueryRow(context.Background(), `SELECT cursor FROM partmap_projection WHERE name = $1`, table).Scan(&c)
	if err != nil || c == nil {
		return ""
	}
	return *c
}

// WatchCursor reads table's committed cursor every few milliseconds until
// stop, or the test's end, and fails the test if it ever goes back.
func WatchCursor(t testing.TB, pool *pgxpool.Pool, table string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		var last uint64
		for ctx.Err() == nil {
			if c := SavedCursor(pool, table); c != "" {
				n, err := strconv.ParseUint(c, 10, 64)
				if err != nil {
					t.Errorf("cursor %q is not a feed's", c)
					return
				}
				if n < last {
					t.Errorf("the cursor went back from %d to %d", last, n)
					return
				}
				last = n
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// KeepWriting runs Workloads of n writes on emails in the background,
// with a source seeded by seed, until stop or the test's end.
func KeepWriting(t testing.TB, s partmap.Store, seed uint64, emails, n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, seed+1))
		for ctx.Err() == nil {
			Workload(t, s, rng, emails, n)
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop) // before the store closes
	return stop
}

// CaughtUp reports whether table's committed cursor has no change after
// it in feed. A cursor the feed has trimmed is not caught up: a rebuild
// that has not yet committed its own cursor leaves the old one there (a
// projector that stops on it is for its caller to see).
func CaughtUp(t testing.TB, pool *pgxpool.Pool, feed partmap.Feeder, table string) bool {
	t.Helper()
	c := SavedCursor(pool, table)
	if c == "" {
		return false
	}
	page, err := feed.Changes(context.Background(), partmap.ChangeQuery{After: c, Limit: 1})
	if partmap.ErrorCode(err) == partmap.ECURSOREXPIRED {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Changes) == 0
}

// CheckEqual requires the projected table to hold exactly what s holds,
// each profile with its ETag.
func CheckEqual(t testing.TB, pool *pgxpool.Pool, s partmap.Store, table string) {
	t.Helper()
	got, want := TableRows(t, pool, table), directory(t, s)
	bad := 0
	for email, w := range want {
		g, ok := got[email]
		switch {
		case !ok:
			t.Errorf("%s: missing from the table", email)
		case g.ETag != w.ETag || !maps.Equal(g.Profile, w.Profile):
			t.Errorf("%s: table has %s %v, directory %s %v", email, g.ETag, g.Profile, w.ETag, w.Profile)
		default:
			continue
		}
		if bad++; bad > 10 {
			t.FailNow()
		}
	}
	for email := range got {
		if _, ok := want[email]; !ok {
			t.Errorf("%s: in the table, not in the directory", email)
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("the directory is empty: the test tests nothing")
	}
}

// Row is a profile with its ETag, in a projected table or in a directory.
type Row struct {
	Profile partmap.Profile
	ETag    string
}

// directory reads every profile of s with its ETag: listed a page at a
// time, each page looked up for its versions, which a list through the
// HTTP client does not carry.
func directory(t testing.TB, s partmap.Store) map[string]Row {
	t.Helper()
	ctx := context.Background()
	out := map[string]Row{}
	opts := partmap.ListOptions{Limit: partmap.MaxPageLimit}
	for {
		page, err := s.ListProfiles(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		var emails []string
		for _, r := range page.Profiles {
			emails = append(emails, r.Profile.Email())
		}
		if len(emails) > 0 {
			recs, err := s.FindProfiles(ctx, emails)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				out[r.Profile.Email()] = Row{r.Profile, r.Version.ETag()}
			}
		}
		if page.NextCursor == "" {
			return out
		}
		opts.Cursor = page.NextCursor
	}
}

// TableRows reads every row of a projected table.
func TableRows(t testing.TB, pool *pgxpool.Pool, table string) map[string]Row {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT email, profile::text, etag FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]Row{}
	for rows.Next() {
		var email, js, etag string
		if err := rows.Scan(&email, &js, &etag); err != nil {
			t.Fatal(err)
		}
		var p partmap.Profile
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			t.Fatalf("%s: %v", email, err)
		}
		out[email] = Row{p, etag}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// CompareSearches runs the searches of a Workload's values through SQL on
// the projected table and through s's ListProfiles, pageLimit profiles a
// page, and wants the same profiles: each company, alone and with each
// tier, and each tier alone, one that is never written included.
func CompareSearches(t testing.TB, pool *pgxpool.Pool, s partmap.Store, table string, pageLimit int) {
	t.Helper()
	ctx := context.Background()
	var searches [][]partmap.Match
	for _, c := range Companies {
		searches = append(searches, []partmap.Match{{Field: partmap.FieldCompanyName, Value: c}})
		for _, tier := range Tiers {
			searches = append(searches, []partmap.Match{{Field: partmap.FieldCompanyName, Value: c}, {Field: partmap.FieldCustomerTier, Value: tier}})
		}
	}
	for _, tier := range append(Tiers, "platinum") {
		searches = append(searches, []partmap.Match{{Field: partmap.FieldCustomerTier, Value: tier}})
	}
	found := 0
	for _, where := range searches {
		sql := `SELECT email FROM ` + table + ` WHERE true`
		var args []any
		for _, m := range where {
			if !slices.Contains(partmap.DefaultIndexes, m.Field) {
				t.Fatalf("%s is not indexed", m.Field)
			}
			args = append(args, m.Field, m.Value)
			sql += fmt.Sprintf(` AND profile->>$%d = $%d`, len(args)-1, len(args))
		}
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		want := storetest.SearchEmails(t, s, where, pageLimit)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%v: SQL found %d %v, partmap %d %v", where, len(got), got, len(want), want)
		}
		found += len(want)
	}
	if found == 0 {
		t.Fatal("no search found anything: the searches test nothing")
	}
}
