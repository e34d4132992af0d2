package directory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/search"
)

// maxSearchDepth bounds offset plus count: a sorted page reads that many
// sort keys of each partition.
const maxSearchDepth = 1_000_000

// sortInMemory is how many matches a sorted query reads whole and sorts
// in memory; beyond it, it reads the sort keys of each partition in order,
// only as far as the page needs.
const sortInMemory = 1000

func (d *Directory) Search(ctx context.Context, name string, opts partmap.SearchOptions) (partmap.SearchResult, error) {
	limit := opts.Limit
	switch {
	case limit == 0:
		limit = partmap.DefaultSearchLimit
	case limit < 0:
		limit = 0
	case limit > partmap.MaxSearchLimit:
		return partmap.SearchResult{}, partmap.Errorf(partmap.EINVALID, "LIMIT count is %d; at most %d", limit, partmap.MaxSearchLimit)
	}
	if opts.Offset < 0 || opts.Offset > maxSearchDepth-limit { // not Offset+limit, which can overflow
		return partmap.SearchResult{}, partmap.Errorf(partmap.EINVALID, "LIMIT offset %d and count %d: the offset must be at least 0, and the two add up to at most %d",
			opts.Offset, limit, maxSearchDepth)
	}
	for i, f := range opts.Return {
		if f == "" || slices.Contains(opts.Return[:i], f) {
			return partmap.SearchResult{}, partmap.Errorf(partmap.EINVALID, "RETURN names %q twice, or an empty field", f)
		}
	}
	if err := d.checkStarted(ctx); err != nil {
		return partmap.SearchResult{}, err
	}
	ix, err := d.readyIndex(ctx, name)
	if err != nil {
		return partmap.SearchResult{}, err
	}
	node, err := search.Parse(ix.schema, opts.Query)
	if err != nil {
		return partmap.SearchResult{}, err
	}
	sortField := -1
	if opts.SortBy != "" {
		sortField = slices.IndexFunc(ix.fields, func(f search.Field) bool { return f.Name == opts.SortBy })
		if sortField < 0 {
			return partmap.SearchResult{}, &partmap.Error{Code: partmap.EINVALID, Field: opts.SortBy,
				Message: fmt.Sprintf("Property `%s` not loaded nor in schema", opts.SortBy)}
		}
	}
	var res partmap.SearchResult
	err = d.read(func(sv *serving) error {
		var err error
		res, err = d.runSearch(ctx, sv, ix, node, opts, sortField, limit)
		return err
	})
	return res, err
}

// readyIndex returns the named index, once built. An index this server
// has not heard of yet, or has heard of as building, is looked up in the
// metadata again: another server may have created or built it.
func (d *Directory) readyIndex(ctx context.Context, name string) (*searchIndex, error) {
	ix := d.searchSet().get(name)
	if ix == nil || ix.meta.Build != nil {
		meta, err := d.refreshSearch(ctx)
		if err != nil {
			return nil, err
		}
		ix = d.searchSet().get(name)
		if ix != nil && ix.meta.Build != nil {
			return nil, partmap.Errorf(partmap.EUNAVAILABLE, "index %q is still being built: %d of %d partitions indexed; retry once it is built (GET /indexes, FT.INFO)",
				name, ix.meta.Build.Built, meta.Partitions)
		}
	}
	if ix == nil {
		return nil, partmap.Errorf(partmap.ENOTFOUND, "Unknown Index name")
	}
	return ix, nil
}

// query is one search on one layout generation.
type query struct {
	d        *Directory
	ctx      context.Context
	ix       *searchIndex
	gen, n   int
	now      int64
	universe [][]string // every live profile's email, by partition, once read
	// due are the profiles with a deadline that has passed, as they are
	// now (nil: gone), whose entries may be stale until the sweeper
	// reclaims what expired: settleDue reads them.
	due map[string]dueProfile
}

type dueProfile struct {
	p   int
	rec *partmap.Record
}

func (d *Directory) runSearch(ctx context.Context, sv *serving, ix *searchIndex, node search.Node, opts partmap.SearchOptions, sortField, limit int) (partmap.SearchResult, error) {
	q := &query{d: d, ctx: ctx, ix: ix, gen: sv.cur.Generation, n: sv.cur.Partitions, now: d.now()}
	sets, err := q.eval(node, nil)
	if err != nil {
		return partmap.SearchResult{}, err
	}
	if err := q.settleDue(node, sets); err != nil {
		return partmap.SearchResult{}, err
	}
	var res partmap.SearchResult
	for _, s := range sets {
		res.Total += int64(len(s))
	}
	scope := fmt.Appendf(nil, "index=%s;slots=%v;query=%s;sort=%s,%t;version=%d", ix.meta.Def.Name, ix.meta.Slots, node, opts.SortBy, opts.Descending, q.gen)
	offset := opts.Offset
	var after *engine.Position
	if opts.Cursor != "" {
		pos, err := decodeCursor(d.cursors, opts.Cursor, q.n, scope)
		if err != nil {
			return partmap.SearchResult{}, err
		}
		offset = 0
		if sortField >= 0 {
			offset, _ = strconv.Atoi(pos.Email)
		} else {
			after = &pos
		}
	}
	var order []engine.Position
	var records map[string]*partmap.Record
	if sortField < 0 {
		order = inOrder(sets, after, offset, limit+1)
	} else if order, records, err = q.sorted(sv, sets, sortField, opts.Descending, offset+limit+1); err != nil {
		return partmap.SearchResult{}, err
	} else {
		order = order[min(offset, len(order)):]
	}
	more := len(order) > limit
	order = order[:min(limit, len(order))]
	if more && limit > 0 {
		last := order[len(order)-1]
		if sortField >= 0 {
			last = engine.Position{Email: strconv.Itoa(offset + limit)}
		}
		res.NextCursor = encodeCursor(d.cursors, last, scope)
	}
	if len(order) == 0 {
		return res, nil
	}
	emails := make([]string, len(order))
	for i, p := range order {
		emails[i] = p.Email
	}
	var recs []*partmap.Record
	if records != nil {
		for _, e := range emails {
			recs = append(recs, records[e])
		}
	} else if recs, err = d.readBatch(ctx, sv, emails); err != nil {
		return partmap.SearchResult{}, err
	}
	res.Hits = make([]partmap.SearchHit, 0, len(order))
	for i, rec := range recs {
		// A profile changed between its entries and its record being read
		// is left out, as it no longer matches.
		if rec == nil || !search.Match(ix.schema, node, rec.Profile) {
			continue
		}
		res.Hits = append(res.Hits, hit(emails[i], rec.Profile, opts))
	}
	return res, nil
}

func hit(email string, p partmap.Profile, opts partmap.SearchOptions) partmap.SearchHit {
	h := partmap.SearchHit{Email: email}
	switch {
	case opts.NoContent:
	case opts.Return != nil:
		h.Fields = []partmap.FieldValue{}
		for _, f := range opts.Return {
			if v, ok := p[f]; ok {
				h.Fields = append(h.Fields, partmap.FieldValue{Name: f, Value: v})
			}
		}
	default:
		h.Fields = make([]partmap.FieldValue, 0, len(p))
		for _, f := range slices.Sorted(mapsKeys(p)) {
			h.Fields = append(h.Fields, partmap.FieldValue{Name: f, Value: p[f]})
		}
	}
	return h
}

func mapsKeys(p partmap.Profile) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range p {
			if !yield(k) {
				return
			}
		}
	}
}

// inOrder is the matches in enumeration order after after, less the
// first skip, at most want of them.
func inOrder(sets [][]string, after *engine.Position, skip, want int) []engine.Position {
	var out []engine.Position
	first := 0
	if after != nil {
		first = int(after.Partition)
	}
	for p := first; p < len(sets) && len(out) < want; p++ {
		emails := sets[p]
		if after != nil && p == int(after.Partition) {
			i, found := slices.BinarySearch(emails, after.Email)
			if found {
				i++
			}
			emails = emails[i:]
		}
		if skip >= len(emails) {
			skip -= len(emails)
			continue
		}
		emails = emails[skip:]
		skip = 0
		for _, e := range emails[:min(len(emails), want-len(out))] {
			out = append(out, engine.Position{Partition: partmap.Partition(p), Email: e})
		}
	}
	return out
}

// eval returns the emails node matches, by partition, each sorted, from
// the index entries alone. With only, it reads only the partitions only
// marks, and says nothing of the others: an intersection asks its later
// parts only where the first left something.
func (q *query) eval(node search.Node, only []bool) ([][]string, error) {
	switch n := node.(type) {
	case search.All:
		return q.all()
	case search.Not:
		all, err := q.all()
		if err != nil {
			return nil, err
		}
		not, err := q.eval(n.Node, only)
		if err != nil {
			return nil, err
		}
		return combine(all, not, minus), nil
	case search.And:
		// The likely narrowest first: exact words and tags, then prefixes
		// and ranges, then unions; negations last.
		nodes := slices.Clone(n.Nodes)
		slices.SortStableFunc(nodes, func(a, b search.Node) int { return cost(a) - cost(b) })
		out := [][]string(nil)
		for _, c := range nodes {
			if out != nil {
				if empty(out) {
					break
				}
				only = present(out)
			}
			if not, ok := c.(search.Not); ok && out != nil {
				s, err := q.eval(not.Node, only)
				if err != nil {
					return nil, err
				}
				out = combine(out, s, minus)
				continue
			}
			s, err := q.eval(c, only)
			if err != nil {
				return nil, err
			}
			if out == nil {
				out = s
			} else {
				out = combine(out, s, intersect)
			}
		}
		return out, nil
	case search.Or:
		out := make([][]string, q.n)
		for _, c := range n.Nodes {
			s, err := q.eval(c, only)
			if err != nil {
				return nil, err
			}
			out = combine(out, s, union)
		}
		return out, nil
	}
	return q.leaf(node, only)
}

// cost ranks a node by how much of the index it is likely to read.
func cost(n search.Node) int {
	switch n.(type) {
	case search.Tag, search.Term:
		return 0
	case search.Prefix, search.Range:
		return 1
	case search.Not:
		return 3
	case search.All:
		return 4
	}
	return 2
}

// present marks the partitions where sets holds something.
func present(sets [][]string) []bool {
	out := make([]bool, len(sets))
	for p, s := range sets {
		out[p] = len(s) > 0
	}
	return out
}

// span is a range of one entry field's tails.
type span struct {
	field    int
	from, to string
}

func exact(field int, value string) span {
	v := entryValue(value)
	return span{field, v + "\x00", v + "\x01"}
}

// leaf reads the entries of a Tag, Term, Prefix or Range node.
func (q *query) leaf(node search.Node, only []bool) ([][]string, error) {
	ix := q.ix
	slot := func(name string) int {
		i := slices.IndexFunc(ix.fields, func(f search.Field) bool { return f.Name == name })
		return ix.meta.Slots[i]
	}
	text := func(field string) []string {
		if field == "" {
			return ix.schema.TextFields()
		}
		return []string{field}
	}
	var spans []span
	switch n := node.(type) {
	case search.Tag:
		if ix.legacy {
			return q.legacy(n)
		}
		for _, v := range n.Values {
			spans = append(spans, exact(slot(n.Field), v))
		}
	case search.Term:
		for _, f := range text(n.Field) {
			for _, w := range ix.schema.Expand(f, n.Word) {
				spans = append(spans, exact(slot(f), w))
			}
		}
	case search.Prefix:
		for _, f := range text(n.Field) {
			p := entryValue(n.Prefix)
			spans = append(spans, span{slot(f), p, p + "\xff"})
		}
	case search.Range:
		// An infinity is a value too: an exclusive one is left out.
		s := span{field: slot(n.Field)}
		if !math.IsInf(n.Min, -1) || n.MinExclusive {
			s.from = numberValue(n.Min)
			if n.MinExclusive {
				s.from += "\x01"
			}
		}
		if !math.IsInf(n.Max, 1) || n.MaxExclusive {
			s.to = numberValue(n.Max)
			if !n.MaxExclusive {
				s.to += "\x01"
			}
		}
		spans = append(spans, s)
	default:
		return nil, fmt.Errorf("search: no plan for %T", node)
	}
	return q.read(spans, only)
}

// read returns the emails of the entries of every span, in every
// partition, in one call to the backend.
func (q *query) read(spans []span, only []bool) ([][]string, error) {
	ranges := make([]engine.IndexRange, 0, len(spans)*q.n)
	for p := range q.n {
		if only != nil && !only[p] {
			continue
		}
		for _, s := range spans {
			ranges = append(ranges, engine.IndexRange{Part: engine.Part{Generation: q.gen, Partition: partmap.Partition(p)},
				Field: s.field, From: s.from, To: s.to, EmailsOnly: true})
		}
	}
	found, err := q.d.searcher.IndexRanges(q.ctx, ranges)
	if err != nil {
		return nil, err
	}
	out := make([][]string, q.n)
	for i, es := range found {
		p := int(ranges[i].Part.Partition)
		for _, e := range es {
			out[p] = append(out[p], e.Email)
		}
	}
	for p, s := range out {
		if len(s) > 1 {
			slices.Sort(s)
			out[p] = slices.Compact(s)
		}
	}
	return out, nil
}

// legacy reads the equality index of a directory's indexed field: a tag
// of its values is the whole value.
func (q *query) legacy(n search.Tag) ([][]string, error) {
	field := slices.Index(q.d.indexes, n.Field)
	out := make([][]string, q.n)
	for _, v := range n.Values {
		eq := engine.Query{Generation: q.gen, End: partmap.Partition(q.n), Limit: 1000,
			Where: []engine.IndexMatch{{Field: field, Value: v}}}
		for {
			items, err := q.d.engine.Scan(q.ctx, eq)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				out[it.Partition] = append(out[it.Partition], it.Email)
			}
			if len(items) < eq.Limit {
				break
			}
			eq.After = &items[len(items)-1].Position
		}
	}
	for p, s := range out {
		if len(s) > 1 {
			slices.Sort(s)
			out[p] = slices.Compact(s)
		}
	}
	return out, nil
}

// all is every live profile, by partition: a query of * or a negation
// reads every record.
func (q *query) all() ([][]string, error) {
	if q.universe != nil {
		return q.universe, nil
	}
	out := make([][]string, q.n)
	sq := engine.Query{Generation: q.gen, End: partmap.Partition(q.n), Limit: 1000}
	for {
		items, err := q.d.engine.Scan(q.ctx, sq)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if live(&it.Record, q.now) != nil {
				out[it.Partition] = append(out[it.Partition], it.Email)
			}
		}
		if len(items) < sq.Limit {
			break
		}
		sq.After = &items[len(items)-1].Position
	}
	q.universe = out
	return out, nil
}

// settleDue corrects sets for the profiles with a deadline that has
// passed: until the sweeper reclaims an expired field or profile, its
// entries stay, so each such profile's record is read and matched as it
// is now.
func (q *query) settleDue(node search.Node, sets [][]string) error {
	due, err := q.d.engine.Due(q.ctx, q.gen, 0, partmap.Partition(q.n), q.now+1, math.MaxInt, nil)
	if err != nil || len(due) == 0 {
		return err
	}
	byPart := map[partmap.Partition][]string{}
	for _, e := range due {
		if !slices.Contains(byPart[e.Partition], e.Email) {
			byPart[e.Partition] = append(byPart[e.Partition], e.Email)
		}
	}
	for p, emails := range byPart {
		recs, err := q.d.engine.ReadRecords(q.ctx, engine.Part{Generation: q.gen, Partition: p}, emails)
		if err != nil {
			return err
		}
		for i, e := range emails {
			rec := live(recs[i], q.now)
			if q.due == nil {
				q.due = map[string]dueProfile{}
			}
			q.due[e] = dueProfile{int(p), rec}
			in := rec != nil && search.Match(q.ix.schema, node, rec.Profile)
			at, found := slices.BinarySearch(sets[p], e)
			switch {
			case in && !found:
				sets[p] = slices.Insert(sets[p], at, e)
			case !in && found:
				sets[p] = slices.Delete(sets[p], at, at+1)
			}
		}
	}
	return nil
}

// sorted returns the first want matches in SORTBY order: by the field's
// sort key (descending with desc), ties by email, profiles without one
// last, by email. A few matches are read whole and sorted (with their
// records, returned); more are merged from every partition's sort keys,
// each read in order a few at a time, so that the merge reads about one
// key per partition and then only as many as the page passes over.
func (q *query) sorted(sv *serving, sets [][]string, field int, desc bool, want int) ([]engine.Position, map[string]*partmap.Record, error) {
	var total int
	for _, s := range sets {
		total += len(s)
	}
	f := q.ix.fields[field]
	slot := q.ix.sortSlot(field)
	if f.Type == search.TypeNumeric {
		slot = q.ix.meta.Slots[field]
	}
	if total <= sortInMemory || slot == 0 {
		return q.sortInMemory(sv, sets, f.Name, desc, want)
	}
	m := &merge{q: q, slot: slot, desc: desc}
	var first []*sortStream
	for p, s := range sets {
		if len(s) > 0 {
			first = append(first, &sortStream{p: p, batch: 4})
		}
	}
	if err := m.fill(first); err != nil {
		return nil, nil, err
	}
	type cand struct {
		key, email string
		p          int
	}
	var got []cand
	keyed := map[int]map[string]bool{} // by partition, the matches met
	key := func(p int, email string) {
		if keyed[p] == nil {
			keyed[p] = map[string]bool{}
		}
		keyed[p][email] = true
	}
	// A profile with a deadline that has passed may hold a sort key that
	// has expired: its key is taken from the record as it is now, never
	// from the index.
	var dueKeys []cand
	for e, due := range q.due {
		if _, member := slices.BinarySearch(sets[due.p], e); !member || due.rec == nil {
			continue
		}
		if v, ok := due.rec.Profile[f.Name]; ok {
			k, ok := sortValue(v), true
			if f.Type == search.TypeNumeric {
				var n float64
				n, ok = search.ParseNumber(v)
				k = numberValue(n)
			}
			if ok {
				dueKeys = append(dueKeys, cand{k, e, due.p})
				key(due.p, e)
			}
		}
	}
	for len(m.heap) > 0 {
		st := m.heap[0]
		e := st.buf[0]
		if len(got) >= want && got[len(got)-1].key != e.Value {
			break // the page's last key's ties are all in
		}
		if _, due := q.due[e.Email]; due {
			// Its key, if any, is among dueKeys.
		} else if _, member := slices.BinarySearch(sets[st.p], e.Email); member {
			got = append(got, cand{e.Value, e.Email, st.p})
			key(st.p, e.Email)
		}
		if err := m.advance(); err != nil {
			return nil, nil, err
		}
	}
	got = append(got, dueKeys...)
	slices.SortFunc(got, func(a, b cand) int {
		c := strings.Compare(a.key, b.key)
		if desc {
			c = -c
		}
		if c == 0 {
			c = strings.Compare(a.email, b.email)
		}
		return c
	})
	out := make([]engine.Position, 0, min(want, total))
	for _, c := range got[:min(len(got), want)] {
		out = append(out, engine.Position{Partition: partmap.Partition(c.p), Email: c.email})
	}
	if len(out) == want {
		return out, nil, nil
	}
	// Every stream ran to its end: the matches it did not meet have no key.
	var keyless []engine.Position
	for p, s := range sets {
		for _, e := range s {
			if !keyed[p][e] {
				keyless = append(keyless, engine.Position{Partition: partmap.Partition(p), Email: e})
			}
		}
	}
	slices.SortFunc(keyless, func(a, b engine.Position) int { return strings.Compare(a.Email, b.Email) })
	return append(out, keyless[:min(len(keyless), want-len(out))]...), nil, nil
}

// sortStream is one partition's sort keys, read in order a batch at a
// time, each batch twice the last, up to sortBatchMax.
type sortStream struct {
	p        int
	buf      []engine.IndexEntry
	from, to string
	batch    int
	done     bool
}

const sortBatchMax = 1024

// merge is a heap of the streams that have a key buffered, by their first
// key (descending with desc).
type merge struct {
	q    *query
	slot int
	desc bool
	heap []*sortStream
}

func (m *merge) less(a, b *sortStream) bool {
	x, y := a.buf[0], b.buf[0]
	if x.Value != y.Value {
		return (x.Value < y.Value) != m.desc
	}
	return x.Email < y.Email
}

// fill reads the next batch of each stream, in one call, and puts those
// with keys on the heap.
func (m *merge) fill(streams []*sortStream) error {
	ranges := make([]engine.IndexRange, len(streams))
	for i, st := range streams {
		ranges[i] = engine.IndexRange{Part: engine.Part{Generation: m.q.gen, Partition: partmap.Partition(st.p)},
			Field: m.slot, From: st.from, To: st.to, Limit: st.batch, Reverse: m.desc}
	}
	found, err := m.q.d.searcher.IndexRanges(m.q.ctx, ranges)
	if err != nil {
		return err
	}
	for i, st := range streams {
		es := found[i]
		st.buf = es
		if len(es) < st.batch {
			st.done = true
		} else if last := es[len(es)-1]; m.desc {
			st.to = engine.EntryTail(last.Value, last.Email)
		} else {
			st.from = engine.EntryTail(last.Value, last.Email) + "\x00"
		}
		st.batch = min(2*st.batch, sortBatchMax)
		if len(st.buf) > 0 {
			m.push(st)
		}
	}
	return nil
}

// advance drops the heap's first key, reading its stream's next batch
// when its buffer runs out.
func (m *merge) advance() error {
	st := m.heap[0]
	st.buf = st.buf[1:]
	if len(st.buf) > 0 {
		m.down(0)
		return nil
	}
	m.pop()
	if st.done {
		return nil
	}
	return m.fill([]*sortStream{st})
}

func (m *merge) push(st *sortStream) {
	m.heap = append(m.heap, st)
	for i := len(m.heap) - 1; i > 0; {
		parent := (i - 1) / 2
		if !m.less(m.heap[i], m.heap[parent]) {
			break
		}
		m.heap[i], m.heap[parent] = m.heap[parent], m.heap[i]
		i = parent
	}
}

func (m *merge) pop() {
	last := len(m.heap) - 1
	m.heap[0] = m.heap[last]
	m.heap = m.heap[:last]
	if last > 0 {
		m.down(0)
	}
}

func (m *merge) down(i int) {
	for {
		l, r, best := 2*i+1, 2*i+2, i
		if l < len(m.heap) && m.less(m.heap[l], m.heap[best]) {
			best = l
		}
		if r < len(m.heap) && m.less(m.heap[r], m.heap[best]) {
			best = r
		}
		if best == i {
			return
		}
		m.heap[i], m.heap[best] = m.heap[best], m.heap[i]
		i = best
	}
}

// sortInMemory reads every match and sorts them as search.Order does.
func (q *query) sortInMemory(sv *serving, sets [][]string, field string, desc bool, want int) ([]engine.Position, map[string]*partmap.Record, error) {
	var emails []string
	for _, s := range sets {
		emails = append(emails, s...)
	}
	recs, err := q.d.readBatch(q.ctx, sv, emails)
	if err != nil {
		return nil, nil, err
	}
	order, err := q.ix.schema.Order(field, desc)
	if err != nil {
		return nil, nil, err
	}
	type row struct {
		pos     engine.Position
		profile map[string]string
	}
	rows := make([]row, 0, len(emails))
	byEmail := make(map[string]*partmap.Record, len(emails))
	for i, e := range emails {
		if recs[i] == nil {
			continue // deleted meanwhile
		}
		byEmail[e] = recs[i]
		// The email decides ties: the key's field, whatever a profile holds.
		p := map[string]string{partmap.FieldEmail: e}
		if v, ok := recs[i].Profile[field]; ok {
			p[field] = v
		}
		rows = append(rows, row{engine.Position{Partition: sv.part(e).Partition, Email: e}, p})
	}
	slices.SortFunc(rows, func(a, b row) int { return order(a.profile, b.profile) })
	out := make([]engine.Position, 0, min(want, len(rows)))
	for _, r := range rows[:min(want, len(rows))] {
		out = append(out, r.pos)
	}
	return out, byEmail, nil
}

// Set operations on sorted, distinct emails, partition by partition.

func combine(a, b [][]string, op func(x, y []string) []string) [][]string {
	out := make([][]string, len(a))
	for p := range a {
		out[p] = op(a[p], b[p])
	}
	return out
}

func empty(sets [][]string) bool {
	for _, s := range sets {
		if len(s) > 0 {
			return false
		}
	}
	return true
}

func union(x, y []string) []string {
	if len(x) == 0 {
		return y
	}
	if len(y) == 0 {
		return x
	}
	out := make([]string, 0, len(x)+len(y))
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch c := strings.Compare(x[i], y[j]); {
		case c < 0:
			out = append(out, x[i])
			i++
		case c > 0:
			out = append(out, y[j])
			j++
		default:
			out = append(out, x[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, x[i:]...)
	return append(out, y[j:]...)
}

func intersect(x, y []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch c := strings.Compare(x[i], y[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			out = append(out, x[i])
			i, j = i+1, j+1
		}
	}
	return out
}

func minus(x, y []string) []string {
	if len(y) == 0 {
		return x
	}
	var out []string
	j := 0
	for _, e := range x {
		for j < len(y) && y[j] < e {
			j++
		}
		if j < len(y) && y[j] == e {
			continue
		}
		out = append(out, e)
	}
	return out
}
