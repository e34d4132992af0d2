package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
	"github.com/partmap/partmap/internal/search"
)

// RunSearchModel is the proof that search is exact (issue 36): random
// index schemas, random writes (puts, patches, field deletes, deletes,
// renames, copies, increments, field and profile deadlines on the test's
// clock, sweeps), the index created before the data or after it (built
// in the background, under the writes), and after every write a random
// query whose total, hits, order and fields must equal the model's:
// the live profiles search.Match accepts, in the documented order. Each
// case also follows a query's cursors page by page, requires a corrupted
// query to be refused with where it went wrong (and to write nothing),
// and checks its partitions for drift. Beyond the model: sorting more
// matches than the directory sorts in memory, and an index dropped and
// created again while writers write. open is RunExpiryModel's: a store
// on the clock, without a sweeper of its own, on a few partitions.
func RunSearchModel(t *testing.T, open ExpiryOpener) {
	t.Run("Model", func(t *testing.T) { runSearchModel(t, open) })
	t.Run("SortBeyondMemory", func(t *testing.T) { runSortBeyondMemory(t, open) })
	t.Run("DropAndCreateUnderWrites", func(t *testing.T) { runDropAndCreateUnderWrites(t, open) })
}

// failer is what the checks need of a *testing.T or a *rapid.T.
type failer interface{ Fatalf(string, ...any) }

// searchChecker holds one store's searches to the model.
type searchChecker struct {
	s          partmap.Store
	name       string
	oracle     *queryOracle
	partitions int
	// alt, during a resize, is the other layout's partition count: an
	// unsorted result may come in its order too.
	alt int
	// built is set once the index has answered: from then on it never
	// says it is building.
	built bool
	// queries counts the searches compared, for the log.
	queries *atomic.Int64
}

// check runs q with opts and compares its answer with the model's over
// live. While the index builds, EUNAVAILABLE is a right answer.
func (c *searchChecker) check(rt failer, q *qnode, text string, opts partmap.SearchOptions, live map[string]partmap.Profile, what string) {
	ctx := context.Background()
	opts.Query = text
	got, err := c.s.Search(ctx, c.name, opts)
	if !c.built && partmap.ErrorCode(err) == partmap.EUNAVAILABLE {
		return
	}
	c.queries.Add(1)
	node, perr := search.Parse(c.oracle.schema, text)
	if q != nil {
		// The tree means what the parser reads: leaf by leaf, combined
		// as the syntax says, on every profile.
		for _, p := range live {
			m, dropped := c.oracle.matches(rt, q, "", p)
			switch {
			case dropped && (perr == nil || !strings.Contains(perr.Error(), stopWordsOnly)):
				rt.Fatalf("%s: %q is only stop words, but parses to %v (%v)", what, text, node, perr)
			case !dropped && perr != nil:
				rt.Fatalf("%s: %q does not parse: %v", what, text, perr)
			case !dropped && m != search.Match(c.oracle.schema, node, p):
				rt.Fatalf("%s: %q parses to %s, which on %s says %v; its leaves say %v", what, text, node, model.Describe(p), !m, m)
			}
		}
	}
	var want []partmap.Profile
	if perr == nil {
		want, perr = c.oracle.expected(live, node, opts, c.partitions)
	}
	if perr == nil && c.alt > 0 && opts.SortBy == "" {
		// Mid-resize the result is in either layout's order.
		other, _ := c.oracle.expected(live, node, opts, c.alt)
		if got.Total == int64(len(other)) && slices.EqualFunc(got.Hits, wantHits(other, opts), sameHit) {
			want = other
		}
	}
	if perr != nil {
		if partmap.ErrorCode(err) != partmap.EINVALID || !strings.Contains(err.Error(), perr.(*partmap.Error).Message) {
			rt.Fatalf("%s: search %q %+v: got %v, want EINVALID %q", what, text, opts, err, perr)
		}
		return
	}
	if err != nil {
		rt.Fatalf("%s: search %q %+v: %v", what, text, opts, err)
	}
	c.built = true
	limit := pageLimit(opts)
	page := wantHits(want, opts)
	if got.Total != int64(len(want)) || !slices.EqualFunc(got.Hits, page, sameHit) {
		rt.Fatalf("%s: search %q (%s) %+v:\ngot   total %d %s\nmodel total %d %s\nover %d live profiles: %s",
			what, text, node, opts, got.Total, showHits(got.Hits), len(want), showHits(page), len(live), describeAll(live))
	}
	if more := opts.Offset+limit < len(want) && limit > 0; more != (got.NextCursor != "") {
		rt.Fatalf("%s: search %q %+v: next cursor %q, but %d of %d matches are left", what, text, opts, got.NextCursor, len(want)-opts.Offset-limit, len(want))
	}
}

// pageLimit is how many hits opts ask for.
func pageLimit(opts partmap.SearchOptions) int {
	switch {
	case opts.Limit == 0:
		return partmap.DefaultSearchLimit
	case opts.Limit < 0:
		return 0
	}
	return opts.Limit
}

// wantHits are the hits of the page opts ask for of the whole ordered
// result want.
func wantHits(want []partmap.Profile, opts partmap.SearchOptions) []partmap.SearchHit {
	page := want[min(opts.Offset, len(want)):]
	page = page[:min(pageLimit(opts), len(page))]
	out := make([]partmap.SearchHit, len(page))
	for i, p := range page {
		out[i] = wantHit(p, opts)
	}
	return out
}

// pages follows cursors with pages of size from offset on: together the
// pages must be the whole ordered result from offset, each page full but
// the last, the total the same on each.
func (c *searchChecker) pages(rt failer, text string, opts partmap.SearchOptions, size int, live map[string]partmap.Profile) {
	ctx := context.Background()
	node, err := search.Parse(c.oracle.schema, text)
	if err != nil {
		return
	}
	want, err := c.oracle.expected(live, node, opts, c.partitions)
	if err != nil {
		return
	}
	opts.Query, opts.Limit = text, size
	total := len(want)
	want = want[min(opts.Offset, len(want)):]
	var got []partmap.SearchHit
	for n := 0; ; n++ {
		res, err := c.s.Search(ctx, c.name, opts)
		if err != nil {
			rt.Fatalf("page %d of %q %+v: %v", n, text, opts, err)
		}
		c.queries.Add(1)
		got = append(got, res.Hits...)
		if res.Total != int64(total) {
			rt.Fatalf("page %d of %q: total %d, model %d", n, text, res.Total, total)
		}
		if res.NextCursor == "" {
			break
		}
		if len(res.Hits) != size || n > len(want) {
			rt.Fatalf("page %d of %q has %d hits of %d, and a next cursor", n, text, len(res.Hits), size)
		}
		opts.Cursor, opts.Offset = res.NextCursor, 0
	}
	wantHits := make([]partmap.SearchHit, len(want))
	for i, p := range want {
		wantHits[i] = wantHit(p, opts)
	}
	if !slices.EqualFunc(got, wantHits, sameHit) {
		rt.Fatalf("pages of %d of %q (%s) %+v:\ngot   %s\nmodel %s", size, text, node, opts, showHits(got), showHits(wantHits))
	}
}

func describeAll(live map[string]partmap.Profile) string {
	if len(live) > 20 {
		return "(too many to show)"
	}
	var parts []string
	for _, e := range slices.Sorted(maps.Keys(live)) {
		parts = append(parts, model.Describe(live[e]))
	}
	return strings.Join(parts, "; ")
}

// liveProfiles are the profiles a reader sees at now.
func liveProfiles(state model.ExpiryState, now int64) map[string]partmap.Profile {
	out := map[string]partmap.Profile{}
	for e, entry := range state.LiveAt(now) {
		out[e] = entry.Profile
	}
	return out
}

// waitIndexBuilt polls until the index answers, for up to a minute.
func waitIndexBuilt(t interface{ Fatalf(string, ...any) }, s partmap.Store, name string) {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.Search(context.Background(), name, partmap.SearchOptions{Query: "*", Limit: -1})
		if err == nil {
			return
		}
		if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || time.Now().After(deadline) {
			t.Fatalf("index %s: %v", name, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkAllPartitions checks every partition of the layout: no drift.
func checkAllPartitions(t interface{ Fatalf(string, ...any) }, s partmap.Store) {
	err := s.CheckPartitions(context.Background(), 0, 0, func(c partmap.PartitionCheck) error {
		if !c.OK() {
			return fmt.Errorf("check of %s: %+v", c.Partition, c)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

func runSearchModel(t *testing.T, open ExpiryOpener) {
	ctx := context.Background()
	clock := NewClock(T0)
	s, sweep := open(t, clock.Now)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stats, err := s.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	partitions := stats.MapPartitions()
	// Three emails share a partition, so that order within one counts.
	colliding, _ := Colliding(3, partitions, "search")
	emails := append(colliding, "a@x.io", "b@x.io", "c@x.io")
	genEmail := rapid.SampledFrom(emails)
	var usedPartitions []partmap.Partition
	for _, e := range emails {
		if p := partmap.PartitionOf(e, partitions); !slices.Contains(usedPartitions, p) {
			usedPartitions = append(usedPartitions, p)
		}
	}
	now := func() int64 { return clock.ms.Load() }
	var queries atomic.Int64
	var cases int

	rapid.Check(t, func(rt *rapid.T) {
		cases++
		for _, rec := range listAll(rt, s, partmap.MaxPageLimit) {
			if err := partmap.DeleteProfile(ctx, s, rec.Profile.Email(), partmap.Condition{}); err != nil {
				rt.Fatal(err)
			}
		}
		if err := sweep(ctx); err != nil {
			rt.Fatal(err)
		}
		// The same name every case: each is dropped at the end of its
		// case and created again, while the last one's entries are
		// still being removed. (A case that failed left its index.)
		def := genIndexDefinition(rt, "m")
		dropIndexes(rt, s)
		c := &searchChecker{s: s, name: def.Name, oracle: newQueryOracle(rt, def), partitions: partitions, queries: &queries}
		state := model.ExpiryState{}
		fields := append(slices.Clone(searchFields), searchUnindexed)
		genField := rapid.SampledFrom(fields)
		distinct := func(min int) *rapid.Generator[[]string] {
			return rapid.SliceOfNDistinct(genField, min, 3, func(s string) string { return s })
		}
		genWhen := func(rt *rapid.T) partmap.When {
			return partmap.When{Relative: true, Millis: rapid.SampledFrom([]int64{1, 250, 1000, 3000}).Draw(rt, "ttl")}
		}
		genOp := func(rt *rapid.T) partmap.Operation {
			email := genEmail.Draw(rt, "email")
			op := partmap.Operation{Email: email}
			switch op.Op = rapid.SampledFrom([]partmap.OpKind{
				partmap.OpPut, partmap.OpPut, partmap.OpPut, partmap.OpPatch, partmap.OpPatch, partmap.OpIncrement,
				partmap.OpDelete, partmap.OpRename, partmap.OpRename, partmap.OpCopy, partmap.OpExpire, partmap.OpPersist,
				partmap.OpSetFields,
			}).Draw(rt, "op"); op.Op {
			case partmap.OpPut:
				op.Email, op.Profile = "", partmap.Profile{partmap.FieldEmail: email}
				for _, f := range distinct(0).Draw(rt, "fields") {
					op.Profile[f] = genSearchValue(rt, def, f)
				}
			case partmap.OpPatch:
				op.Patch = partmap.Patch{}
				for _, f := range distinct(1).Draw(rt, "fields") {
					if rapid.IntRange(0, 2).Draw(rt, "delete") == 0 {
						op.Patch[f] = nil
					} else {
						v := genSearchValue(rt, def, f)
						op.Patch[f] = &v
					}
				}
			case partmap.OpIncrement:
				op.Field = genField.Draw(rt, "field")
				op.By = rapid.SampledFrom([]int64{1, -1, 5}).Draw(rt, "by")
			case partmap.OpRename, partmap.OpCopy:
				op.To = genEmail.Draw(rt, "to")
				op.Replace = rapid.Bool().Draw(rt, "replace")
			case partmap.OpExpire:
				if rapid.Bool().Draw(rt, "fieldsOnly") {
					op.Fields = distinct(1).Draw(rt, "fields")
				}
				op.When = genWhen(rt)
			case partmap.OpPersist:
				if rapid.Bool().Draw(rt, "fieldsOnly") {
					op.Fields = distinct(1).Draw(rt, "fields")
				}
			case partmap.OpSetFields:
				op.Set = partmap.Patch{}
				for _, f := range distinct(1).Draw(rt, "fields") {
					v := genSearchValue(rt, def, f)
					op.Set[f] = &v
				}
				if rapid.Bool().Draw(rt, "withTTL") {
					w := genWhen(rt)
					op.Expiry.When = &w
				}
			}
			return op
		}
		// query draws a query and its options and checks them; a query
		// about the profile just written, now and then, so that reads
		// of one's own writes are asked about directly.
		query := func(rt *rapid.T, what string, written string) {
			live := liveProfiles(state, now())
			var q *qnode
			if p, ok := live[written]; ok && rapid.Bool().Draw(rt, "aboutWrite") {
				q = aboutProfile(rt, def, p)
			}
			if q == nil {
				q = genQuery(rt, def)
			}
			c.check(rt, q, q.render(rt), genSearchOptions(rt, def), live, what)
		}

		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		createAt := rapid.IntRange(0, steps).Draw(rt, "createAt")
		created := false
		for i := 0; i <= steps; i++ {
			if i == createAt {
				if err := s.CreateIndex(ctx, def); err != nil {
					rt.Fatalf("create %+v: %v", def, err)
				}
				created = true
			}
			if i == steps {
				break
			}
			switch rapid.IntRange(0, 11).Draw(rt, "action") {
			case 0:
				clock.ms.Add(rapid.SampledFrom([]int64{1, 250, 1000, 3000}).Draw(rt, "advance"))
			case 1:
				if err := sweep(ctx); err != nil {
					rt.Fatal(err)
				}
			default:
				op := genOp(rt)
				// A build or a cleaning holds a partition's lock now and
				// then; a conflict wrote nothing, and is retried.
				var got partmap.OperationResult
				err := retry(func() (err error) { got, err = s.Apply(ctx, op); return err })
				m := op
				if op.Op == partmap.OpPut {
					m.Email = ""
				}
				key := op.Email
				if key == "" {
					key = op.Profile.Email()
				}
				// RunExpiryModel holds the replies to the model; here the
				// model's state is what the searches are held to, and a
				// reply need only agree on whether the operation took.
				next, want := state.ApplyOp(m, now())
				if g := model.FromOperation(got, err); g.Code != want.Code {
					rt.Fatalf("at %d: %s %s %+v: got %v (%v), model %v", now(), op.Op, key, op, g, err, want)
				}
				if err == nil {
					state = next
				}
				if op.To != "" && err == nil {
					key = op.To
				}
				if created {
					query(rt, fmt.Sprintf("after %s %s", op.Op, key), key)
				}
			}
		}
		waitIndexBuilt(rt, s, def.Name)
		c.built = true
		for range rapid.IntRange(1, 3).Draw(rt, "queries") {
			query(rt, "once built", "")
		}
		live := liveProfiles(state, now())
		// Paging: the pages of a query, from an offset, are its whole
		// ordered result from there.
		q := genQuery(rt, def)
		opts := genSearchOptions(rt, def)
		if opts.SortBy == searchUnindexed {
			opts.SortBy = ""
		}
		c.pages(rt, q.render(rt), opts, rapid.IntRange(1, 3).Draw(rt, "pageSize"), live)
		// A corrupted query is refused, in the parser's words, which say
		// where it went wrong; it writes nothing. A corruption the syntax
		// accepts is one more query to answer exactly.
		text := corrupt(rt, genQuery(rt, def).render(rt))
		if _, perr := search.Parse(c.oracle.schema, text); perr == nil {
			c.check(rt, nil, text, genSearchOptions(rt, def), live, "corrupted but valid")
		} else {
			before := versions(rt, s, emails)
			_, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: text})
			msg := perr.(*partmap.Error).Message
			// A query of stop words alone is wrong nowhere in particular.
			if at := errorOffset(msg); (at < 0 || at > len(text)) && !strings.Contains(msg, stopWordsOnly) {
				rt.Fatalf("%q: the error %q does not say where the query went wrong", text, msg)
			}
			if partmap.ErrorCode(err) != partmap.EINVALID || !strings.Contains(err.Error(), msg) {
				rt.Fatalf("%q: got %v, want EINVALID %q", text, err, msg)
			}
			if after := versions(rt, s, emails); !slices.Equal(before, after) {
				rt.Fatalf("%q: a refused query changed versions %v to %v", text, before, after)
			}
		}
		// FT.INFO's num_docs is the directory's live profiles.
		infos, err := s.ListIndexes(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		i := slices.IndexFunc(infos, func(x partmap.IndexInfo) bool { return x.Name == def.Name })
		if i < 0 || infos[i].Building || infos[i].Docs != int64(len(live)) || len(infos[i].Fields) != len(def.Fields) {
			rt.Fatalf("list indexes: %+v; want %s built, with %d docs", infos, def.Name, len(live))
		}
		// The partitions the emails fall in hold every profile there is.
		for _, p := range usedPartitions {
			if c, err := s.CheckPartition(ctx, p); err != nil || !c.OK() {
				rt.Fatalf("check of %s: %+v %v", p, c, err)
			}
		}
		if err := s.DropIndex(ctx, def.Name); err != nil {
			rt.Fatal(err)
		}
		if _, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: "*"}); partmap.ErrorCode(err) != partmap.ENOTFOUND {
			rt.Fatalf("search of a dropped index: %v", err)
		}
	})
	checkAllPartitions(t, s)
	t.Logf("%d cases, %d searches compared with the model", cases, queries.Load())
}

// dropIndexes drops every index but the legacy one.
func dropIndexes(t failer, s partmap.Store) {
	infos, err := s.ListIndexes(context.Background())
	if err != nil {
		t.Fatalf("list indexes: %v", err)
	}
	for _, x := range infos {
		if !x.Legacy {
			if err := s.DropIndex(context.Background(), x.Name); err != nil {
				t.Fatalf("drop %s: %v", x.Name, err)
			}
		}
	}
}

// versions reads the version of each email's profile, 0 for none.
func versions(t interface{ Fatalf(string, ...any) }, s partmap.Store, emails []string) []partmap.Version {
	recs, err := s.FindProfiles(context.Background(), emails)
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	out := make([]partmap.Version, len(recs))
	for i, r := range recs {
		if r != nil {
			out[i] = r.Version
		}
	}
	return out
}

// aboutProfile draws a leaf that p's values satisfy, where its indexed
// fields allow one: a tag it holds, a range around its number, a word of
// its text or a prefix of one.
func aboutProfile(rt *rapid.T, def partmap.IndexDefinition, p partmap.Profile) *qnode {
	var leaves []*qnode
	schema, err := schemaOf(def)
	if err != nil {
		return nil
	}
	for _, f := range def.Fields {
		v, ok := p[f.Name]
		if !ok {
			continue
		}
		switch strings.ToUpper(f.Type) {
		case partmap.IndexTag:
			for _, tag := range schema.Tags(f.Name, v) {
				leaves = append(leaves, &qnode{kind: qTag, field: f.Name, values: []string{tag}})
			}
		case partmap.IndexNumeric:
			if n, ok := search.ParseNumber(v); ok {
				s := fmt.Sprint(n)
				leaves = append(leaves, &qnode{kind: qRange, field: f.Name, lo: s, hi: s, single: true})
			}
		case partmap.IndexText:
			for _, w := range schema.Terms(f.Name, v) {
				if strings.HasPrefix(w, search.StemPrefix) || strings.ContainsAny(w, " \t") {
					continue
				}
				leaves = append(leaves, &qnode{kind: qTerm, field: f.Name, word: w})
				if len([]rune(w)) >= search.MinPrefix {
					leaves = append(leaves, &qnode{kind: qPrefix, word: string([]rune(w)[:search.MinPrefix])})
				}
			}
		}
	}
	if len(leaves) == 0 {
		return nil
	}
	return rapid.SampledFrom(leaves).Draw(rt, "aboutWrite")
}

// runSortBeyondMemory sorts more matches than the directory sorts in
// memory (1,000), so that it merges the partitions' sort keys instead:
// the order and the pages must still be the model's, with profiles
// lacking the field (or whose value is no number, or whose field has
// expired) last.
func runSortBeyondMemory(t *testing.T, open ExpiryOpener) {
	ctx := context.Background()
	clock := NewClock(T0)
	s, sweep := open(t, clock.Now)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stats, err := s.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	def := partmap.IndexDefinition{Name: "wide", Fields: []partmap.IndexField{
		{Name: "n", Type: partmap.IndexNumeric, Sortable: true},
		{Name: "t", Type: partmap.IndexTag, Sortable: true, CaseSensitive: true},
		{Name: "w", Type: partmap.IndexText, Sortable: true},
		{Name: "g", Type: partmap.IndexTag},
	}}
	const total = 1100
	profiles := make([]partmap.Profile, total)
	for i := range profiles {
		p := partmap.Profile{partmap.FieldEmail: fmt.Sprintf("w%04d@x.io", i), "g": "all"}
		switch i % 13 {
		case 0: // no sort field at all
		case 1:
			p["n"], p["t"], p["w"] = "not a number", "", "Ünï"
		default:
			p["n"] = fmt.Sprint((i * 7919) % 97) // many ties
			p["t"] = []string{"b", "B", "a", "é", "ab"}[i%5]
			p["w"] = []string{"Zed", "alpha", "Alpha", "beta"}[i%4]
		}
		profiles[i] = p
	}
	MustUpsert(t, s, profiles)
	if err := s.CreateIndex(ctx, def); err != nil {
		t.Fatal(err)
	}
	waitIndexBuilt(t, s, def.Name)
	// Some sort fields expire: their stale keys stay until a sweep.
	state := model.ExpiryState{}
	for _, p := range profiles {
		state[p.Email()] = model.Entry{Profile: p}
	}
	for i := 5; i < total; i += 50 {
		e := profiles[i].Email()
		op := partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"n", "t", "w"}, When: partmap.When{Relative: true, Millis: 10}}
		if _, err := s.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
		next, _ := state.ApplyOp(op, clock.ms.Load())
		state = next
	}
	clock.ms.Add(10)
	c := &searchChecker{s: s, name: def.Name, oracle: newQueryOracle(t, def), partitions: stats.MapPartitions(), built: true, queries: &atomic.Int64{}}
	for _, swept := range []bool{false, true} {
		if swept {
			if err := sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}
		live := liveProfiles(state, clock.ms.Load())
		offsets, limits := []int{0, 1, 17, 500, 990, 1090}, []int{1, 10, 100}
		i := 0
		for _, sortBy := range []string{"n", "t", "w"} {
			for _, desc := range []bool{false, true} {
				for _, q := range []string{"@g:{all}", "-@n:[0 10] | @t:{b}"} {
					opts := partmap.SearchOptions{SortBy: sortBy, Descending: desc, Offset: offsets[i%len(offsets)], Limit: limits[i%len(limits)], NoContent: true}
					c.check(t, nil, q, opts, live, fmt.Sprintf("swept %v", swept))
					i++
				}
			}
		}
		c.pages(t, "@g:{all}", partmap.SearchOptions{SortBy: "n", Descending: swept, NoContent: true}, 97, live)
	}
	checkAllPartitions(t, s)
}

// runDropAndCreateUnderWrites drops an index and creates it again, with
// another definition, again and again while writers put, patch, delete
// and rename profiles: once the writers stop and the last one is built,
// its answers are exact, and no partition holds an entry its profiles do
// not back, the dropped incarnations' included (an index created over
// their freed slots would show them).
func runDropAndCreateUnderWrites(t *testing.T, open ExpiryOpener) {
	ctx := context.Background()
	clock := NewClock(T0)
	s, _ := open(t, clock.Now)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stats, err := s.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writers, owned = 3, 4
	defs := []partmap.IndexDefinition{
		{Name: "churn", Fields: []partmap.IndexField{{Name: "a", Type: partmap.IndexText}, {Name: "b", Type: partmap.IndexTag, Sortable: true}}},
		{Name: "churn", Fields: []partmap.IndexField{{Name: "b", Type: partmap.IndexText, NoStem: true}, {Name: "c", Type: partmap.IndexNumeric, Sortable: true}}},
		{Name: "churn", Fields: []partmap.IndexField{{Name: "c", Type: partmap.IndexTag, Separator: ";"}, {Name: "a", Type: partmap.IndexText, Sortable: true}, {Name: "d", Type: partmap.IndexNumeric}}, Stopwords: []string{}},
	}
	values := []string{"alice runs", "Gold;vip", "7", "-1", "new york", "gold", "3.5", "ali", "running late", "inf"}
	states := make([]model.ExpiryState, writers)
	var stopped atomic.Bool
	done := make(chan error, writers)
	for w := range writers {
		states[w] = model.ExpiryState{}
		go func() {
			emails := make([]string, owned)
			for i := range emails {
				emails[i] = fmt.Sprintf("w%d-%d@churn.io", w, i)
			}
			for i := 0; !stopped.Load() || i < 30; i++ {
				e := emails[(i*7+w)%owned]
				op := partmap.Operation{Email: e}
				v := values[(i*3+w)%len(values)]
				switch i % 6 {
				case 0, 1:
					op.Op, op.Email, op.Profile = partmap.OpPut, "", partmap.Profile{partmap.FieldEmail: e, "a": v, "b": values[(i+1)%len(values)], "c": values[(i+2)%len(values)], "d": values[(i+5)%len(values)]}
				case 2:
					op.Op, op.Patch = partmap.OpPatch, partmap.Patch{searchFields[i%4]: &v, searchFields[(i+1)%4]: nil}
				case 3:
					op.Op, op.To, op.Replace = partmap.OpRename, emails[(i*7+w+1)%owned], true
				case 4:
					op.Op = partmap.OpDelete
				case 5:
					op.Op, op.Set = partmap.OpSetFields, partmap.Patch{"d": &v}
				}
				var got partmap.OperationResult
				err := retry(func() (err error) { got, err = s.Apply(ctx, op); return err })
				m := op
				if op.Op == partmap.OpPut {
					m.Email = ""
				}
				next, want := states[w].ApplyOp(m, T0)
				if g := model.FromOperation(got, err); g.Code != want.Code {
					done <- fmt.Errorf("%s %s: got %v (%v), model %v", op.Op, e, g, err, want)
					return
				}
				if err == nil {
					states[w] = next
				}
			}
			done <- nil
		}()
	}
	for i := range 8 {
		def := defs[i%len(defs)]
		if err := s.DropIndex(ctx, def.Name); err != nil && partmap.ErrorCode(err) != partmap.ENOTFOUND {
			t.Fatal(err)
		}
		if err := s.CreateIndex(ctx, def); err != nil {
			t.Fatal(err)
		}
		// Searches meanwhile answer, or say that the index builds.
		for range 3 {
			_, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: "*", SortBy: def.Fields[0].Name})
			if err != nil && partmap.ErrorCode(err) != partmap.EUNAVAILABLE {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(i) * time.Millisecond)
		}
	}
	stopped.Store(true)
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	state := model.ExpiryState{}
	for _, st := range states {
		maps.Copy(state, st)
	}
	live := liveProfiles(state, T0)
	last := defs[7%len(defs)]
	waitIndexBuilt(t, s, last.Name)
	queries := &atomic.Int64{}
	rapid.Check(t, func(rt *rapid.T) {
		c := &searchChecker{s: s, name: last.Name, oracle: newQueryOracle(rt, last), partitions: stats.MapPartitions(), built: true, queries: queries}
		q := genQuery(rt, last)
		c.check(rt, q, q.render(rt), genSearchOptions(rt, last), live, "after the churn")
	})
	checkAllPartitions(t, s)
	// Index every field as a TAG over slots the dropped incarnations
	// used, once their cleaning is done: an entry they left would be
	// drift there.
	probe := partmap.IndexDefinition{Name: "probe"}
	for _, f := range searchFields {
		probe.Fields = append(probe.Fields, partmap.IndexField{Name: f, Type: partmap.IndexTag, Sortable: true})
	}
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		dropIndexes(t, s)
		if err := s.CreateIndex(ctx, probe); err != nil {
			t.Fatal(err)
		}
		waitIndexBuilt(t, s, probe.Name)
		checkAllPartitions(t, s)
	}
	t.Logf("%d profiles after the churn, %d searches compared with the model", len(live), queries.Load())
}
