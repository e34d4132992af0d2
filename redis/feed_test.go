package redis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/record"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

type opener func(t *testing.T, opts *redis.Options) *redis.Store

// openStarted opens a store with open and starts it.
func openStarted(t *testing.T, open opener, opts *redis.Options) *redis.Store {
	t.Helper()
	s := open(t, opts)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// onBoth runs f on one server and on the cluster.
func onBoth(t *testing.T, f func(t *testing.T, open opener)) {
	onServer(t, f)
	onCluster(t, f)
}

// onServer and onCluster run f on one server, or on the cluster. A test
// whose cluster half is long calls onCluster from a TestCluster test of
// its own: make test runs those without the race detector, beside the
// other packages' tests, as the Makefile explains.
func onServer(t *testing.T, f func(t *testing.T, open opener)) {
	t.Run("Server", func(t *testing.T) { f(t, open) })
}

func onCluster(t *testing.T, f func(t *testing.T, open opener)) {
	t.Run("Cluster", func(t *testing.T) { f(t, openCluster) })
}

// readFeed reads pages of limit from after until one is empty, and
// returns the changes and the last page's Next. It first lets the
// horizon pass what was written.
func readFeed(t *testing.T, s *redis.Store, after string, limit int) ([]partmap.Change, string) {
	t.Helper()
	time.Sleep(5 * time.Millisecond)
	var out []partmap.Change
	for {
		page, err := s.Changes(context.Background(), partmap.ChangeQuery{After: after, Limit: limit})
		if err != nil {
			t.Fatalf("Changes(%q): %v", after, err)
		}
		if page.Next == "" && (after != "" || len(page.Changes) > 0) {
			t.Fatalf("Changes(%q): an empty Next", after)
		}
		out = append(out, page.Changes...)
		after = page.Next
		if len(page.Changes) == 0 {
			return out, after
		}
	}
}

// want is one change a test expects.
type want struct {
	op      partmap.OpKind
	email   string
	deleted bool
	version partmap.Version
	profile partmap.Profile
}

func (w want) String() string {
	return fmt.Sprintf("%s %s deleted=%v v%d %v", w.op, w.email, w.deleted, w.version, w.profile)
}

func got(c partmap.Change) want {
	w := want{op: c.Op, email: c.Email, deleted: c.Record == nil}
	if c.Record != nil {
		w.version, w.profile = c.Record.Version, c.Record.Profile
	}
	return w
}

// expect is the change op made to email, as the store holds it now.
func expect(t *testing.T, s *redis.Store, op partmap.OpKind, email string) want {
	t.Helper()
	rec, err := s.FindProfile(context.Background(), email)
	if errors.Is(err, partmap.ErrNotFound) {
		return want{op: op, email: email, deleted: true}
	}
	if err != nil {
		t.Fatal(err)
	}
	return want{op: op, email: email, version: rec.Version, profile: rec.Profile}
}

// checkPerProfile compares the changes with those expected, profile by
// profile in order, and checks that the feed's order holds each
// partition's (the stream IDs in the cursors grow).
func checkPerProfile(t *testing.T, changes []partmap.Change, wants []want) {
	t.Helper()
	if len(changes) != len(wants) {
		for _, c := range changes {
			t.Logf("got %v", got(c))
		}
		t.Fatalf("got %d changes, want %d", len(changes), len(wants))
	}
	gotBy, wantBy := map[string][]string{}, map[string][]string{}
	for _, c := range changes {
		gotBy[c.Email] = append(gotBy[c.Email], got(c).String())
	}
	for _, w := range wants {
		wantBy[w.email] = append(wantBy[w.email], w.String())
	}
	for e, ws := range wantBy {
		if !slices.Equal(gotBy[e], ws) {
			t.Errorf("changes of %s:\n got %q\nwant %q", e, gotBy[e], ws)
		}
	}
	for i := 1; i < len(changes); i++ {
		if !changes[i-1].Time.Before(changes[i].Time.Add(time.Millisecond)) {
			t.Errorf("change %d at %v after change %d at %v", i-1, changes[i-1].Time, i, changes[i].Time)
		}
		if a, b := place(t, changes[i-1].Cursor), place(t, changes[i].Cursor); slices.Compare(a, b) >= 0 {
			t.Errorf("change %d at %v, not before change %d at %v", i-1, a, i, b)
		}
	}
}

// place reads an event's cursor, ms-partition-seq, as numbers: the feed's
// order is theirs.
func place(t *testing.T, cursor string) []uint64 {
	t.Helper()
	var out []uint64
	for _, f := range strings.Split(cursor, "-") {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("cursor %q: %v", cursor, err)
		}
		out = append(out, n)
	}
	if len(out) != 3 {
		t.Fatalf("an event's cursor %q", cursor)
	}
	return out
}

// Every kind of write records exactly one change per profile it changes,
// with its operation, its email and the record after it.
func TestFeedEveryWrite(t *testing.T) {
	onBoth(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		var skew atomic.Int64
		opts := redis.Options{}
		opts.SweepInterval = -1
		opts.Clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		s := openStarted(t, open, &opts)
		e := storetest.Spread(8, "every") // each in a partition of its own
		var wants []want
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e[0], "n": "1"}, partmap.Condition{})
		must(err)
		wants = append(wants, expect(t, s, partmap.OpPut, e[0]))
		_, err = partmap.PatchProfile(ctx, s, e[0], partmap.Patch{"city": ptr("Lyon")}, partmap.Condition{})
		must(err)
		wants = append(wants, expect(t, s, partmap.OpPatch, e[0]))
		_, err = partmap.IncrementField(ctx, s, e[0], "n", 2, partmap.Condition{})
		must(err)
		wants = append(wants, expect(t, s, partmap.OpIncrement, e[0]))
		_, err = partmap.RenameProfile(ctx, s, e[0], e[1], partmap.Condition{})
		must(err)
		wants = append(wants, expect(t, s, partmap.OpRename, e[0]), expect(t, s, partmap.OpRename, e[1]))
		_, err = s.Transact(ctx, []partmap.Operation{
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: e[2], "a": "1"}},
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: e[3], "b": "1"}},
			{Op: partmap.OpPatch, Email: e[2], Patch: partmap.Patch{"a": ptr("2")}},
		})
		must(err)
		wants = append(wants, expect(t, s, partmap.OpPatch, e[2]), expect(t, s, partmap.OpPut, e[3]))
		must(partmap.DeleteProfile(ctx, s, e[3], partmap.Condition{}))
		wants = append(wants, expect(t, s, partmap.OpDelete, e[3]))
		_, err = s.UpsertProfiles(ctx, []partmap.Profile{{partmap.FieldEmail: e[4]}, {partmap.FieldEmail: e[5], "x": "y"}})
		must(err)
		wants = append(wants, expect(t, s, partmap.OpPut, e[4]), expect(t, s, partmap.OpPut, e[5]))
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e[4], When: partmap.When{Millis: 60_000, Relative: true}})
		must(err)
		wants = append(wants, expect(t, s, partmap.OpExpire, e[4]))
		skew.Store(int64(2 * time.Minute))
		st, err := s.Sweep(ctx)
		must(err)
		if st.Profiles != 1 {
			t.Fatalf("the sweep reclaimed %+v, want one profile", st)
		}
		wants = append(wants, expect(t, s, partmap.OpExpired, e[4]))

		changes, next := readFeed(t, s, "", 1000)
		checkPerProfile(t, changes, wants)
		for _, c := range changes {
			if d := time.Since(c.Time); d < 0 || d > time.Minute {
				t.Errorf("change %s at %v", c.Cursor, c.Time)
			}
		}

		// From every cursor, exactly the rest; and small pages see it all.
		for i, c := range changes {
			rest, _ := readFeed(t, s, c.Cursor, 1000)
			if len(rest) != len(changes)-i-1 || (len(rest) > 0 && rest[0].Cursor != changes[i+1].Cursor) {
				t.Fatalf("after change %d (%s): %d changes, want %d", i, c.Cursor, len(rest), len(changes)-i-1)
			}
		}
		for _, limit := range []int{1, 2, 3} {
			paged, _ := readFeed(t, s, "", limit)
			if !slices.EqualFunc(paged, changes, func(a, b partmap.Change) bool { return a.Cursor == b.Cursor }) {
				t.Fatalf("pages of %d: %d changes, want the %d of one page", limit, len(paged), len(changes))
			}
		}
		if rest, _ := readFeed(t, s, next, 10); len(rest) != 0 {
			t.Fatalf("after the last Next: %d changes", len(rest))
		}

		// "now", then a write: just that write.
		page, err := s.Changes(ctx, partmap.ChangeQuery{After: partmap.FeedNow})
		must(err)
		if len(page.Changes) != 0 || page.Next == partmap.FeedNow {
			t.Fatalf("now: %+v", page)
		}
		_, _, err = partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e[6]}, partmap.Condition{})
		must(err)
		later, _ := readFeed(t, s, page.Next, 10)
		checkPerProfile(t, later, []want{expect(t, s, partmap.OpPut, e[6])})
		page, err = s.Changes(ctx, partmap.ChangeQuery{After: page.Next, Wait: time.Second})
		must(err)
		if len(page.Changes) != 1 || page.Changes[0].Email != e[6] {
			t.Fatalf("a long-poll after now: %+v", page)
		}
	})
}

func ptr(s string) *string { return &s }

func nOf(t *testing.T, c partmap.Change) int {
	t.Helper()
	n, err := strconv.Atoi(c.Record.Profile["n"])
	if err != nil {
		t.Fatalf("%s: %v", c.Email, err)
	}
	return n
}

// A cursor this store did not issue is invalid.
func TestFeedBadCursors(t *testing.T) {
	ctx := context.Background()
	s := openStarted(t, open, nil)
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "a@example.com"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"x", "1-2", "01-2-3", "1-2-3-4", "-1-2-3", "1--3", "+1", "1733040000000-4294967295-0", "0", "1 ", "1-2-99999999999999999999", "9007199254740992", fmt.Sprint(time.Now().Add(time.Hour).UnixMilli())} {
		_, err := s.Changes(ctx, partmap.ChangeQuery{After: c})
		var perr *partmap.Error
		if !errors.As(err, &perr) || perr.Code != partmap.EINVALID || perr.Field != "after" {
			t.Errorf("cursor %q: got %v, want invalid after", c, err)
		}
	}
	for _, c := range []string{"1733040000000", "1733040000000-17-3"} {
		if _, err := s.Changes(ctx, partmap.ChangeQuery{After: c}); err != nil {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
}

// Writers in parallel, then a reader in small pages: every acknowledged
// write is there, each profile's in order, and the last change of each
// profile is the record the store holds.
func TestFeedConcurrentWriters(t *testing.T) {
	onBoth(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := openStarted(t, open, nil)
		emails := storetest.Spread(12, "conc")
		for _, e := range emails {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": "0"}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		acked := map[string][]partmap.Version{} // per profile, in the order acknowledged
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 40 {
					e := emails[(w+i)%len(emails)]
					var v partmap.Version
					var err error
					if i%5 == 4 {
						var r []partmap.OperationResult
						r, err = s.Transact(ctx, []partmap.Operation{
							{Op: partmap.OpIncrement, Email: e, Field: "n", By: 1},
							{Op: partmap.OpIncrement, Email: emails[(w+i+1)%len(emails)], Field: "n", By: 1},
						})
						if err == nil {
							v = r[0].Record.Version
						}
					} else {
						var inc partmap.Increment
						inc, err = partmap.IncrementField(ctx, s, e, "n", 1, partmap.Condition{})
						v = inc.Version
					}
					if errors.Is(err, partmap.ErrLockConflict) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acked[e] = append(acked[e], v)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		changes, _ := readFeed(t, s, "", 7)
		seen := map[string]map[partmap.Version]bool{}
		last := map[string]partmap.Change{}
		for _, c := range changes {
			if seen[c.Email] == nil {
				seen[c.Email] = map[partmap.Version]bool{}
			}
			// Versions are not ordered; the counter is.
			if p, ok := last[c.Email]; ok && nOf(t, c) <= nOf(t, p) {
				t.Fatalf("%s: n=%d after n=%d", c.Email, nOf(t, c), nOf(t, p))
			}
			seen[c.Email][c.Record.Version] = true
			last[c.Email] = c
		}
		for e, vs := range acked {
			for _, v := range vs {
				if v != 0 && !seen[e][v] {
					t.Errorf("%s: acknowledged version %d has no change", e, v)
				}
			}
		}
		for _, e := range emails {
			rec, err := s.FindProfile(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if c := last[e]; c.Record == nil || c.Record.Version != rec.Version || !maps.Equal(c.Record.Profile, rec.Profile) {
				t.Errorf("%s: last change %+v, store holds %+v", e, c.Record, rec)
			}
		}
	})
}

// A resize records no change, and a cursor from before it resumes after
// it without a gap; writes after it come after every earlier one.
func TestFeedAcrossResize(t *testing.T) {
	onBoth(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := openStarted(t, open, nil)
		resize := func(n int) {
			if _, err := s.Resize(ctx, n); err != nil {
				t.Fatal(err)
			}
			storetest.WaitResized(t, s)
		}
		resize(8)
		emails := storetest.Spread(20, "resize")
		for _, e := range emails {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "g": "8"}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		before, next := readFeed(t, s, "", 1000)
		if len(before) != len(emails) {
			t.Fatalf("%d changes before the resize, want %d", len(before), len(emails))
		}
		mid := before[5].Cursor
		resize(13)
		if moved, _ := readFeed(t, s, next, 1000); len(moved) != 0 {
			t.Fatalf("the resize recorded %d changes", len(moved))
		}
		for _, e := range emails {
			if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"g": ptr("13")}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		resize(5)
		for _, e := range emails[:5] {
			if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"g": ptr("5")}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		rest, _ := readFeed(t, s, mid, 3)
		if len(rest) != len(emails)-6+len(emails)+5 {
			t.Fatalf("after a cursor from before the resizes: %d changes, want %d", len(rest), len(emails)-6+len(emails)+5)
		}
		all, _ := readFeed(t, s, "", 1000)
		if !slices.EqualFunc(all[6:], rest, func(a, b partmap.Change) bool { return a.Cursor == b.Cursor }) {
			t.Fatal("resuming did not give the rest of the whole feed")
		}
		// Each profile's changes in order: 8, 13, then 5.
		gens := map[string][]string{}
		for _, c := range all {
			gens[c.Email] = append(gens[c.Email], c.Record.Profile["g"])
		}
		for i, e := range emails {
			w := []string{"8", "13"}
			if i < 5 {
				w = append(w, "5")
			}
			if !slices.Equal(gens[e], w) {
				t.Errorf("%s: %v, want %v", e, gens[e], w)
			}
		}
	})
}

// A trim by age expires a cursor behind it; "" starts at what is left.
func TestFeedTrimExpiresCursor(t *testing.T) {
	onBoth(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		var skew atomic.Int64
		opts := redis.Options{}
		opts.Clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		opts.FeedRetention = &partmap.Retention{Age: time.Hour}
		opts.FeedTrimInterval = -1 // the test trims
		s := openStarted(t, open, &opts)
		emails := storetest.Spread(4, "trim")
		for _, e := range emails {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		old, next := readFeed(t, s, "", 1000)
		if len(old) != 4 {
			t.Fatalf("%d changes, want 4", len(old))
		}
		st, err := s.TrimFeed(ctx)
		if err != nil || st.Events != 4 || st.Oldest != old[0].Time.UnixMilli() {
			t.Fatalf("a trim that keeps all: %+v %v", st, err)
		}
		skew.Store(int64(time.Hour + time.Second)) // every change is now older than the retention
		if st, err = s.TrimFeed(ctx); err != nil || st.Events != 0 || st.Oldest != 0 {
			t.Fatalf("a trim of all: %+v %v", st, err)
		}
		_, err = s.Changes(ctx, partmap.ChangeQuery{After: old[1].Cursor})
		if !errors.Is(err, &partmap.Error{Code: partmap.ECURSOREXPIRED}) || partmap.ErrorCode(err) != partmap.ECURSOREXPIRED {
			t.Fatalf("a trimmed cursor: got %v, want cursor expired", err)
		}
		// Nothing after next was trimmed: it still reads.
		if rest, _ := readFeed(t, s, next, 10); len(rest) != 0 {
			t.Fatalf("after the newest cursor: %d changes", len(rest))
		}
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: emails[0], "x": "1"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if rest, _ := readFeed(t, s, "", 10); len(rest) != 1 || rest[0].Email != emails[0] {
			t.Fatalf("from the oldest kept: %d changes, want 1", len(rest))
		}
	})
}

// At a resize's switch every stream's IDs are raised past every master's
// clock: here one master's clock runs an hour ahead (an event it appended
// then), and the profile's next change, in another partition of the next
// generation, still sorts after it.
func TestFeedSwitchRaisesStreams(t *testing.T) {
	ctx := context.Background()
	s := open(t, nil)
	db := int(server.nextDB.Load() % databases)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var email string
	for _, e := range storetest.Spread(50, "ahead") {
		if partmap.PartitionOf(e, partmap.DefaultPartitions) != partmap.PartitionOf(e, 7) {
			email = e
			break
		}
	}
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	defer c.Close()
	feedKey := func(p partmap.Partition) string { return "{" + p.String() + "}::feed" }
	ahead := time.Now().Add(time.Hour).UnixMilli()
	head := record.AppendEventHead(nil, partmap.OpDelete, "ahead@example.com", true)
	if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: feedKey(partmap.PartitionOf(email, partmap.DefaultPartitions)),
		ID: fmt.Sprintf("%d-0", ahead), Values: []any{"e", head}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resize(ctx, 7); err != nil {
		t.Fatal(err)
	}
	storetest.WaitResized(t, s)
	if _, err := partmap.PatchProfile(ctx, s, email, partmap.Patch{"a": ptr("1")}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	last, err := c.XRevRangeN(ctx, feedKey(partmap.PartitionOf(email, 7)), "+", "-", 1).Result()
	if err != nil || len(last) != 1 {
		t.Fatalf("the new partition's stream: %v %v", last, err)
	}
	if ms, _ := strconv.ParseInt(strings.Split(last[0].ID, "-")[0], 10, 64); ms <= ahead {
		t.Fatalf("the change after the switch is %s, not after %d-0", last[0].ID, ahead)
	}
}

// A trim to a count keeps about that many per partition's feed: a cursor
// behind what it deleted expires, one at the last deleted event does not.
func TestFeedTrimKeep(t *testing.T) {
	onBoth(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		opts := redis.Options{}
		opts.FeedRetention = &partmap.Retention{Events: 1} // one per partition, at least
		opts.FeedTrimInterval = -1                         // the test trims
		s := openStarted(t, open, &opts)
		for i := range 3 {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "keep@example.com", "i": strconv.Itoa(i)}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		all, _ := readFeed(t, s, "", 10)
		if len(all) != 3 {
			t.Fatalf("%d changes, want 3", len(all))
		}
		if st, err := s.TrimFeed(ctx); err != nil || st.Events != 1 || st.Oldest != all[2].Time.UnixMilli() {
			t.Fatalf("trim: %+v %v", st, err)
		}
		if _, err := s.Changes(ctx, partmap.ChangeQuery{After: all[0].Cursor}); partmap.ErrorCode(err) != partmap.ECURSOREXPIRED {
			t.Fatalf("after a deleted change's predecessor: got %v, want cursor expired", err)
		}
		rest, _ := readFeed(t, s, all[1].Cursor, 10)
		if len(rest) != 1 || rest[0].Cursor != all[2].Cursor {
			t.Fatalf("after the last deleted change: %d changes, want the last", len(rest))
		}
		if rest, _ := readFeed(t, s, "", 10); len(rest) != 1 || rest[0].Cursor != all[2].Cursor {
			t.Fatalf("from the oldest kept: %d changes, want the last", len(rest))
		}
	})
}

// abandonAfterCommitPoint runs a transaction of a put to each email whose
// committer stops for good right after its commit point, leaving the
// other partitions' intents.
func abandonAfterCommitPoint(t *testing.T, s *redis.Store, emails []string) {
	t.Helper()
	type abandoned struct{}
	redis.SetTxHook(func(step string) {
		if step == "decided" {
			panic(abandoned{})
		}
	})
	defer redis.SetTxHook(nil)
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(abandoned); !ok {
				panic(r)
			}
		}
	}()
	var ops []partmap.Operation
	for _, e := range emails {
		ops = append(ops, partmap.Operation{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: e}})
	}
	_, err := s.Transact(context.Background(), ops)
	t.Fatalf("the committer was not abandoned: %v", err)
}

// A transaction whose committer died after its commit point reaches the
// change feed whole though nobody reads or writes its partitions: the
// store's finisher ends it once its locks expire. Without the finisher,
// only the primary partition's change ever showed.
func TestFeedAbandonedTransactionCompletes(t *testing.T) {
	onBoth(t, func(t *testing.T, open opener) {
		s := openStarted(t, open, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, LockTTL: 150 * time.Millisecond})
		emails := storetest.Spread(3, "abandoned")
		abandonAfterCommitPoint(t, s, emails)
		var changes []partmap.Change
		for deadline := time.Now().Add(10 * time.Second); len(changes) < len(emails) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			changes, _ = readFeed(t, s, "", 100)
		}
		if len(changes) != len(emails) {
			t.Fatalf("the feed shows %d changes of a committed transaction of %d after 10 s", len(changes), len(emails))
		}
		seen := map[string]bool{}
		for _, c := range changes {
			seen[c.Email] = true
		}
		for _, e := range emails {
			if !seen[e] {
				t.Errorf("no change for %s", e)
			}
		}
	})
}

// A transaction whose committer is gone after its commit point is rolled
// forward by whoever meets its intents, and each rolled partition's event
// is appended then, once: the intent carries it.
func TestFeedRolledForwardTransaction(t *testing.T) {
	onBoth(t, func(t *testing.T, open opener) {
		// No finisher, no backstop: the reads must roll it forward.
		s := openStarted(t, open, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, LockTTL: 150 * time.Millisecond, FinishInterval: -1, BackstopRate: -1})
		emails := storetest.Spread(3, "rolled")
		abandonAfterCommitPoint(t, s, emails)
		time.Sleep(300 * time.Millisecond) // its locks expire
		var wants []want
		for _, e := range emails {
			wants = append(wants, expect(t, s, partmap.OpPut, e)) // reads roll it forward
		}
		for _, e := range emails {
			wants = append(wants, expect(t, s, partmap.OpPut, e)) // once
		}
		changes, _ := readFeed(t, s, "", 100)
		checkPerProfile(t, changes, wants[:len(emails)])
		if wants[0].deleted {
			t.Fatal("the transaction was not applied")
		}
	})
}

// An idle long poll reads the feed once, not at every poll: while no
// master's count of appends (INFO commandstats) moves, it asks only for
// that, one command per master, where a read runs a script on every
// partition's stream. A write then ends the wait at the next poll.
func TestFeedIdleLongPollReadsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		open  opener
		nodes func() []*goredis.Client
	}{
		{"Server", open, func() []*goredis.Client {
			return []*goredis.Client{goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket})}
		}},
		{"Cluster", openCluster, func() (out []*goredis.Client) {
			for _, a := range cluster.Masters() {
				out = append(out, goredis.NewClient(&goredis.Options{Addr: a}))
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := tc.open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: partmap.DefaultLockWait, FeedTrimInterval: -1, SweepInterval: -1}, FinishInterval: -1, BackstopRate: -1})
			if _, err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			nodes := tc.nodes()
			defer func() {
				for _, c := range nodes {
					c.Close()
				}
			}()
			xranges := func() (n int) {
				for _, c := range nodes {
					n += commandStats(t, c)["xrange"] // once per stream a read reads; with no backstop, nothing else runs it here
				}
				return n
			}
			now, err := s.Changes(ctx, partmap.ChangeQuery{After: partmap.FeedNow})
			if err != nil {
				t.Fatal(err)
			}
			const wait = 2 * time.Second // ten polls
			before := xranges()
			page, err := s.Changes(ctx, partmap.ChangeQuery{After: now.Next, Wait: wait})
			if err != nil || len(page.Changes) != 0 || !page.CaughtUp {
				t.Fatalf("an idle long poll: %d changes, caught up %v, %v", len(page.Changes), page.CaughtUp, err)
			}
			reads := float64(xranges()-before) / partmap.DefaultPartitions
			t.Logf("an idle long poll of %v read the feed's %d streams %.3f times", wait, partmap.DefaultPartitions, reads)
			if reads > 1 {
				t.Fatalf("an idle long poll of %v read the feed %.1f times, want once", wait, reads)
			}

			done := make(chan partmap.ChangePage, 1)
			go func() {
				page, err := s.Changes(ctx, partmap.ChangeQuery{After: page.Next, Wait: time.Minute})
				if err != nil {
					t.Error(err)
				}
				done <- page
			}()
			time.Sleep(300 * time.Millisecond)
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "woken@example.com"}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
			if page := <-done; len(page.Changes) != 1 || page.Changes[0].Email != "woken@example.com" {
				t.Fatalf("the long poll a write ended: %+v", page)
			}
		})
	}
}
