package directory

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/search"
)

// indexMeta is a search index as the metadata keeps it.
type indexMeta struct {
	Def partmap.IndexDefinition `json:"def"`
	// Slots are the entry fields (engine.SearchFieldBase and up) of the
	// schema's fields, in order; SortSlots those of the sort keys of
	// SORTABLE TEXT and TAG fields (0: none; a NUMERIC field's entries are
	// its sort keys).
	Slots     []int `json:"slots"`
	SortSlots []int `json:"sortSlots,omitempty"`
	// Build is the background build, until it is done.
	Build *indexBuild `json:"build,omitempty"`
}

// indexBuild is where a build has got to: every partition of Generation
// below Built holds the index's entries of every profile.
type indexBuild struct {
	Generation int `json:"version"`
	Built      int `json:"built"`
}

// droppedSlots are the entry fields of a dropped index whose entries are
// still being removed, partition by partition of Generation (from the
// first again after a restart: removing is idempotent); they are not
// reused until every partition is clean.
type droppedSlots struct {
	Name       string `json:"name"`
	Slots      []int  `json:"slots"`
	Generation int    `json:"version"`
	// Index is the index as it was: until its entries are gone, a write
	// removes those of the profile it changes or deletes, which the
	// cleaning, finding no profile, could not.
	Index *indexMeta `json:"index,omitempty"`
}

// searchIndex is a compiled index: its metadata and schema.
type searchIndex struct {
	meta   indexMeta
	schema *search.Schema
	legacy bool
	fields []search.Field
}

// searchSet is every index the directory keeps; it never changes once
// made, and is the engine's Indexer.
type searchSet struct {
	indexes []*searchIndex // the legacy one first, then by name
	byName  map[string]*searchIndex
	dropped []*searchIndex // being cleaned: writes remove their entries
}

func (s *searchSet) get(name string) *searchIndex {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// compile makes a schema of a definition, refusing a bad one.
func compile(def partmap.IndexDefinition) (*search.Schema, error) {
	fields := make([]search.Field, len(def.Fields))
	for i, f := range def.Fields {
		sf := search.Field{Name: f.Name, Sortable: f.Sortable, NoStem: f.NoStem, CaseSensitive: f.CaseSensitive, Whole: f.Whole}
		switch strings.ToUpper(f.Type) {
		case partmap.IndexText:
			sf.Type = search.TypeText
		case partmap.IndexTag:
			sf.Type = search.TypeTag
		case partmap.IndexNumeric:
			sf.Type = search.TypeNumeric
		default:
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
				Message: fmt.Sprintf("field %q has type %q: want TEXT, TAG or NUMERIC", f.Name, f.Type)}
		}
		if sf.Type != search.TypeTag && (f.Separator != "" || f.CaseSensitive || f.Whole) {
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
				Message: fmt.Sprintf("field %q is %s: only a TAG field takes SEPARATOR or CASESENSITIVE", f.Name, sf.Type)}
		}
		switch len(f.Separator) {
		case 0:
		case 1:
			sf.Separator = f.Separator[0]
		default:
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
				Message: fmt.Sprintf("tag separator %q of field %q must be one character", f.Separator, f.Name)}
		}
		fields[i] = sf
	}
	return search.NewSchema(fields, search.Options{Stopwords: def.Stopwords})
}

// checkIndexName accepts the name of a new index.
func checkIndexName(name string) error {
	switch {
	case name == "":
		return partmap.Errorf(partmap.EINVALID, "an index name is empty")
	case len(name) > 128:
		return partmap.Errorf(partmap.EINVALID, "index name %.20q… is longer than 128 bytes", name)
	case !utf8.ValidString(name):
		return partmap.Errorf(partmap.EINVALID, "index name %q is not valid UTF-8", name)
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }):
		return partmap.Errorf(partmap.EINVALID, "index name %q holds white space or a control character", name)
	case name == partmap.LegacyIndexName:
		return partmap.Errorf(partmap.EINVALID, "%q names the index of the directory's indexed fields (serve --index); choose another name", name)
	}
	return nil
}

// legacyIndex presents the directory's equality indexes as TAG fields
// that hold whole values, exactly, as they always have.
func legacyIndex(fields []string) (*searchIndex, error) {
	def := partmap.IndexDefinition{Name: partmap.LegacyIndexName, Stopwords: []string{}}
	for _, f := range fields {
		def.Fields = append(def.Fields, partmap.IndexField{Name: f, Type: partmap.IndexTag, Whole: true, CaseSensitive: true})
	}
	schema, err := compile(def)
	if err != nil {
		return nil, err
	}
	return &searchIndex{meta: indexMeta{Def: def}, schema: schema, legacy: true, fields: schema.Fields()}, nil
}

// newSearchSet compiles the metadata's indexes.
func newSearchSet(legacyFields []string, metas []indexMeta, dropping []droppedSlots) (*searchSet, error) {
	s := &searchSet{byName: map[string]*searchIndex{}}
	if len(legacyFields) > 0 {
		ix, err := legacyIndex(legacyFields)
		if err != nil {
			return nil, err
		}
		s.indexes = append(s.indexes, ix)
	}
	for _, m := range metas {
		schema, err := compile(m.Def)
		if err != nil {
			return nil, fmt.Errorf("search index %q in the metadata: %w", m.Def.Name, err)
		}
		if len(m.Slots) != len(m.Def.Fields) {
			return nil, fmt.Errorf("search index %q in the metadata has %d slots for %d fields", m.Def.Name, len(m.Slots), len(m.Def.Fields))
		}
		s.indexes = append(s.indexes, &searchIndex{meta: m, schema: schema, fields: schema.Fields()})
	}
	slices.SortStableFunc(s.indexes[min(1, len(legacyFields)):], func(a, b *searchIndex) int {
		return strings.Compare(a.meta.Def.Name, b.meta.Def.Name)
	})
	for _, ix := range s.indexes {
		s.byName[ix.meta.Def.Name] = ix
	}
	for _, x := range dropping {
		if x.Index == nil {
			continue
		}
		schema, err := compile(x.Index.Def)
		if err != nil {
			return nil, fmt.Errorf("dropped search index %q in the metadata: %w", x.Name, err)
		}
		s.dropped = append(s.dropped, &searchIndex{meta: *x.Index, schema: schema, fields: schema.Fields()})
	}
	return s, nil
}

// Changes is the engine's Indexer: the entries of every index but the
// legacy one (which the engine keeps itself) that a write changes, field
// by field, and only of the fields whose value it changes.
func (s *searchSet) Changes(email string, prev, next *partmap.Record) (remove, add []engine.IndexEntry) {
	if prev == next {
		return nil, nil
	}
	if prev != nil {
		// A dropped index's entries of the fields the write changes go;
		// removing those the cleaning removed already changes nothing.
		for _, ix := range s.dropped {
			for i, f := range ix.fields {
				before, had := prev.Profile[f.Name]
				var after string
				var has bool
				if next != nil {
					after, has = next.Profile[f.Name]
				}
				if had && (!has || before != after) {
					remove = append(remove, ix.fieldEntries(i, email, before)...)
				}
			}
		}
	}
	for _, ix := range s.indexes {
		if ix.legacy {
			continue
		}
		for i, f := range ix.fields {
			var before, after string
			var had, has bool
			if prev != nil {
				before, had = prev.Profile[f.Name]
			}
			if next != nil {
				after, has = next.Profile[f.Name]
			}
			if had == has && before == after {
				continue
			}
			var old, cur []engine.IndexEntry
			if had {
				old = ix.fieldEntries(i, email, before)
			}
			if has {
				cur = ix.fieldEntries(i, email, after)
			}
			for _, e := range old {
				if !slices.Contains(cur, e) {
					remove = append(remove, e)
				}
			}
			for _, e := range cur {
				if !slices.Contains(old, e) {
					add = append(add, e)
				}
			}
		}
	}
	return remove, add
}

// entries are every entry of ix for a profile.
func (ix *searchIndex) entries(email string, rec *partmap.Record) []engine.IndexEntry {
	var out []engine.IndexEntry
	for i, f := range ix.fields {
		if v, ok := rec.Profile[f.Name]; ok {
			out = append(out, ix.fieldEntries(i, email, v)...)
		}
	}
	return out
}

// fieldEntries are the entries of the i-th field's value: a TEXT field's
// terms, a TAG field's tags, a NUMERIC field's number (none when the value
// is no number), and a SORTABLE TEXT or TAG field's sort key.
func (ix *searchIndex) fieldEntries(i int, email, value string) []engine.IndexEntry {
	f := ix.fields[i]
	var values []string
	switch f.Type {
	case search.TypeText:
		values = ix.schema.Terms(f.Name, value)
	case search.TypeTag:
		values = ix.schema.Tags(f.Name, value)
	case search.TypeNumeric:
		if n, ok := search.ParseNumber(value); ok {
			values = []string{numberValue(n)}
		}
	}
	out := make([]engine.IndexEntry, 0, len(values)+1)
	for _, v := range values {
		out = append(out, engine.IndexEntry{Field: ix.meta.Slots[i], Value: entryValue(v), Email: email})
	}
	slices.SortFunc(out, func(a, b engine.IndexEntry) int { return strings.Compare(a.Value, b.Value) })
	out = slices.Compact(out)
	if s := ix.sortSlot(i); s != 0 && f.Type != search.TypeNumeric {
		out = append(out, engine.IndexEntry{Field: s, Value: sortValue(value), Email: email})
	}
	return out
}

func (ix *searchIndex) sortSlot(i int) int {
	if i < len(ix.meta.SortSlots) {
		return ix.meta.SortSlots[i]
	}
	return 0
}

// entryValue is a term or tag as an entry holds it: entry values hold no
// 0 byte (engine.EntryTail), so one becomes 1, in values and queries
// alike.
func entryValue(v string) string { return strings.ReplaceAll(v, "\x00", "\x01") }

// sortValue is a TEXT or TAG value's sort key, as search.SortKey folds it.
func sortValue(v string) string { return entryValue(strings.ToLower(v)) }

// numberValue is a number's entry value: search.EncodeNumber in hex, so
// that byte order is numeric order and no byte is 0.
func numberValue(n float64) string { return hex.EncodeToString(search.EncodeNumber(n)) }

// searchAdmin serialises the changes to the set of indexes in this
// process, and runs their background work.
type searchAdmin struct {
	mu      sync.Mutex
	running map[string]bool // builds and cleanings under way, by name
	again   map[string]bool // asked for while under way: run once more when done
	stop    context.CancelFunc
	base    context.Context
	work    sync.WaitGroup
	closed  bool
}

type searchSetBox struct{ *searchSet }

// searchSet returns the indexes the directory keeps now.
func (d *Directory) searchSet() *searchSet {
	if b := d.searches.Load(); b != nil {
		return b.searchSet
	}
	return nil
}

// loadSearch compiles the metadata's indexes and hands them to the
// engine: every write staged from then on keeps them.
func (d *Directory) loadSearch(m metadata) error {
	set, err := newSearchSet(d.indexes, m.Search, m.Dropping)
	if err != nil {
		return err
	}
	d.searches.Store(&searchSetBox{set})
	hasOwn := len(m.Search) > 0 || len(m.Dropping) > 0
	if hasOwn {
		d.engine.SetIndexer(set)
	} else {
		d.engine.SetIndexer(nil)
	}
	return nil
}

func (d *Directory) CreateIndex(ctx context.Context, def partmap.IndexDefinition) error {
	if err := checkIndexName(def.Name); err != nil {
		return err
	}
	if _, err := compile(def); err != nil {
		return err
	}
	if d.searcher == nil {
		return partmap.Errorf(partmap.EUNSUPPORTED, "this store cannot keep search indexes")
	}
	def.Fields = slices.Clone(def.Fields)
	for i := range def.Fields {
		def.Fields[i].Type = strings.ToUpper(def.Fields[i].Type)
	}
	a := &d.search
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx = context.WithoutCancel(ctx) // the metadata and the indexer go together
	meta, err := d.updateMeta(ctx, func(m *metadata) error {
		switch {
		case m.Resize != nil:
			return partmap.Errorf(partmap.ECONFLICT, "a resize is in progress; create the index once it has finished")
		case slices.ContainsFunc(m.Search, func(x indexMeta) bool { return x.Def.Name == def.Name }):
			return partmap.Errorf(partmap.EEXISTS, "Index already exists")
		case len(m.Search) >= partmap.MaxSearchIndexes:
			return partmap.Errorf(partmap.EINVALID, "the directory has %d search indexes; at most %d", len(m.Search), partmap.MaxSearchIndexes)
		}
		slots, sortSlots, err := allocateSlots(*m, def)
		if err != nil {
			return err
		}
		m.Search = append(m.Search, indexMeta{Def: def, Slots: slots, SortSlots: sortSlots,
			Build: &indexBuild{Generation: m.Generation}})
		m.Schema = max(m.Schema, schemaSearch)
		return nil
	})
	if err != nil {
		return err
	}
	if err := d.loadSearch(meta); err != nil {
		return err
	}
	d.startSearchWork(meta)
	return nil
}

// allocateSlots gives def's fields the lowest entry fields that no index,
// and no dropped index still being cleaned, uses.
func allocateSlots(m metadata, def partmap.IndexDefinition) (slots, sortSlots []int, err error) {
	used := map[int]bool{}
	for _, x := range m.Search {
		for _, s := range append(slices.Clone(x.Slots), x.SortSlots...) {
			used[s] = true
		}
	}
	for _, x := range m.Dropping {
		for _, s := range x.Slots {
			used[s] = true
		}
	}
	next := engine.SearchFieldBase
	take := func() (int, error) {
		for used[next] {
			next++
		}
		if next > engine.MaxSearchField {
			return 0, partmap.Errorf(partmap.EINVALID, "the directory's search indexes have %d fields and sort keys; at most %d",
				len(used), engine.MaxSearchField-engine.SearchFieldBase+1)
		}
		used[next] = true
		return next, nil
	}
	sortSlots = make([]int, len(def.Fields))
	for i, f := range def.Fields {
		s, err := take()
		if err != nil {
			return nil, nil, err
		}
		slots = append(slots, s)
		if f.Sortable && f.Type != partmap.IndexNumeric {
			if sortSlots[i], err = take(); err != nil {
				return nil, nil, err
			}
		}
	}
	return slots, sortSlots, nil
}

func (d *Directory) DropIndex(ctx context.Context, name string) error {
	a := &d.search
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	meta, err := d.updateMeta(ctx, func(m *metadata) error {
		i := slices.IndexFunc(m.Search, func(x indexMeta) bool { return x.Def.Name == name })
		switch {
		case name == partmap.LegacyIndexName && len(m.Indexes) > 0:
			return partmap.Errorf(partmap.EINVALID, "the index of the directory's indexed fields (serve --index) cannot be dropped")
		case i < 0:
			return partmap.Errorf(partmap.ENOTFOUND, "Unknown Index name")
		case m.Resize != nil:
			return partmap.Errorf(partmap.ECONFLICT, "a resize is in progress; drop the index once it has finished")
		}
		x := m.Search[i]
		slots := slices.Clone(x.Slots)
		for _, s := range x.SortSlots {
			if s != 0 {
				slots = append(slots, s)
			}
		}
		m.Dropping = append(m.Dropping, droppedSlots{Name: name, Slots: slots, Generation: m.Generation, Index: &x})
		m.Search = slices.Delete(m.Search, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	if err := d.loadSearch(meta); err != nil {
		return err
	}
	d.startSearchWork(meta)
	return nil
}

// refreshSearch reads the metadata and, when its indexes are not those
// the directory keeps, loads them: under the lock of CreateIndex and
// DropIndex, so that an older read never replaces what they loaded.
func (d *Directory) refreshSearch(ctx context.Context) (metadata, error) {
	a := &d.search
	a.mu.Lock()
	defer a.mu.Unlock()
	meta, err := d.readMeta(ctx)
	if err != nil {
		return meta, err
	}
	if !sameIndexes(d.searchSet(), meta) {
		if err := d.loadSearch(meta); err != nil {
			return meta, err
		}
		d.startSearchWork(meta)
	}
	return meta, nil
}

func (d *Directory) ListIndexes(ctx context.Context) ([]partmap.IndexInfo, error) {
	meta, err := d.refreshSearch(ctx)
	if err != nil {
		return nil, err
	}
	set := d.searchSet()
	var docs int64
	if len(set.indexes) > 0 && meta.Started {
		stats, err := d.ListPartitions(ctx)
		if err != nil {
			return nil, err
		}
		docs = stats.TotalProfiles
	}
	out := make([]partmap.IndexInfo, 0, len(set.indexes))
	for _, ix := range set.indexes {
		info := partmap.IndexInfo{IndexDefinition: ix.meta.Def, Docs: docs, Progress: 1, Legacy: ix.legacy}
		if b := ix.meta.Build; b != nil {
			info.Building = true
			info.Progress = float64(b.Built) / float64(meta.Partitions)
			info.Docs = 0
		}
		out = append(out, info)
	}
	return out, nil
}

// sameIndexes reports whether set compiled what meta holds now.
func sameIndexes(set *searchSet, m metadata) bool {
	if set == nil {
		return false
	}
	own := set.indexes
	if len(own) > 0 && own[0].legacy {
		own = own[1:]
	}
	if len(own) != len(m.Search) {
		return false
	}
	for _, x := range m.Search {
		ix := set.byName[x.Def.Name]
		if ix == nil || !slices.Equal(ix.meta.Slots, x.Slots) || (ix.meta.Build == nil) != (x.Build == nil) ||
			(x.Build != nil && *x.Build != *ix.meta.Build) {
			return false
		}
	}
	return true
}

// startSearchWork starts, in the background, the build of every index
// still building and the cleaning of every dropped one, unless one runs
// in this process already. Another server running the same work is
// harmless: both write the same entries under each partition's lock.
func (d *Directory) startSearchWork(m metadata) {
	a := &d.search
	if a.closed || d.searcher == nil {
		return
	}
	if a.base == nil {
		a.base, a.stop = context.WithCancel(context.Background())
		if d.engine.Shared() && d.indexPoll > 0 {
			a.work.Add(1)
			go func() {
				defer a.work.Done()
				d.watchSearch(a.base)
			}()
		}
	}
	// Work is named by its index's slots too: an index dropped and created
	// again under the same name while its first build runs is another
	// index, which that build, finding its own gone, leaves alone.
	for _, x := range m.Search {
		if x.Build != nil {
			d.runSearchWork(fmt.Sprint("build:", x.Def.Name, x.Slots), func(ctx context.Context) error { return d.buildIndex(ctx, x.Def.Name, x.Slots) })
		}
	}
	for _, x := range m.Dropping {
		d.runSearchWork(fmt.Sprint("drop:", x.Name, x.Slots), func(ctx context.Context) error { return d.cleanDropped(ctx, x.Name, x.Slots) })
	}
}

// runSearchWork runs fn in the background under name, unless work of
// that name is under way; then that work runs fn once more when it is
// done. The work under way may be past the point where it would see what
// the caller changed: an index dropped and created again with the same
// slots, its cleaning finished, is named as its first build was, and that
// build, ending, would otherwise leave it unbuilt until the next open.
// Callers hold a.mu.
func (d *Directory) runSearchWork(name string, fn func(context.Context) error) {
	a := &d.search
	if a.running == nil {
		a.running, a.again = map[string]bool{}, map[string]bool{}
	}
	if a.running[name] {
		a.again[name] = true
		return
	}
	a.running[name] = true
	a.work.Add(1)
	go func() {
		defer a.work.Done()
		for {
			d.runSearchWorkOnce(name, fn)
			a.mu.Lock()
			again := a.again[name] && a.base.Err() == nil
			delete(a.again, name)
			if !again {
				delete(a.running, name)
			}
			a.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// runSearchWorkOnce runs fn until it succeeds or the directory closes.
func (d *Directory) runSearchWorkOnce(name string, fn func(context.Context) error) {
	a := &d.search
	t0 := time.Now()
	slog.Info("search index work started", "work", name)
	for attempt := 0; ; attempt++ {
		err := fn(a.base)
		if err == nil {
			slog.Info("search index work done", "work", name, "seconds", time.Since(t0).Seconds())
			return
		}
		if a.base.Err() != nil {
			return // closed: a later open resumes it
		}
		slog.Warn("search index work failed; it is retried", "work", name, "err", err)
		select {
		case <-a.base.Done():
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 5*time.Second)):
		}
	}
}

// closeSearch stops the background builds and cleanings (a later open
// resumes them from the metadata) and waits for them.
func (d *Directory) closeSearch() {
	a := &d.search
	a.mu.Lock()
	a.closed = true
	stop := a.stop
	a.mu.Unlock()
	if stop != nil {
		stop()
	}
	a.work.Wait()
}

// On a store that several servers share (Redis), each reads the metadata
// every IndexPoll (defaultIndexPoll) for indexes the others created or
// dropped, and a build or a cleaning waits settlePolls of them before it
// starts, so that every server
// keeps the new set of entries by the time the build visits a partition
// (see Caveats in DESIGN.md: a server stalled for longer can still write
// a profile without its entries, which the check reports).
const (
	defaultIndexPoll = 250 * time.Millisecond
	settlePolls      = 4
)

// watchSearch follows the metadata's indexes, on a shared store.
func (d *Directory) watchSearch(ctx context.Context) error {
	t := time.NewTicker(d.indexPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		d.refreshSearch(ctx) // a store away now is read again at the next tick
	}
}

// settle waits, on a shared store, for every server to follow a change
// of the indexes.
func (d *Directory) settle(ctx context.Context) error {
	if !d.engine.Shared() || d.indexPoll < 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settlePolls * d.indexPoll):
		return nil
	}
}

// searchBuildBatch is how many partitions a build indexes between two
// records of its progress in the metadata.
const searchBuildBatch = 16

// buildIndex indexes every profile of the partitions name's build has not
// reached, partition by partition, each under its lock: a write before
// the build's visit is indexed by it, and one after by the write itself,
// since the engine has kept the index since it was created.
func (d *Directory) buildIndex(ctx context.Context, name string, slots []int) error {
	meta, err := d.readMeta(ctx)
	if err != nil {
		return err
	}
	x := findIndex(meta, name)
	if x == nil || x.Build == nil || !slices.Equal(x.Slots, slots) {
		return nil
	}
	if meta, err = d.refreshSearch(ctx); err != nil {
		return err
	}
	ix := d.searchSet().get(name)
	if ix == nil || !slices.Equal(ix.meta.Slots, slots) {
		return nil
	}
	if err := d.settle(ctx); err != nil {
		return err
	}
	gen, p := x.Build.Generation, x.Build.Built
	if gen != meta.Generation {
		return fmt.Errorf("index %q is building over generation %d, but %d serves", name, gen, meta.Generation)
	}
	bulk := engine.Bulk(ctx)
	for p < meta.Partitions {
		end := min(p+searchBuildBatch, meta.Partitions)
		for ; p < end; p++ {
			if err := d.buildPartition(bulk, ix, engine.Part{Generation: gen, Partition: partmap.Partition(p)}); err != nil {
				if err == errDropped {
					return nil
				}
				return err
			}
		}
		done := p == meta.Partitions
		if _, err := d.updateMeta(ctx, func(m *metadata) error {
			x := findIndex(*m, name)
			if x == nil || x.Build == nil || !slices.Equal(x.Slots, ix.meta.Slots) {
				return errDropped
			}
			x.Build.Built = max(x.Build.Built, p)
			if done {
				x.Build = nil
			}
			return nil
		}); err != nil {
			if err == errDropped {
				return nil
			}
			return err
		}
	}
	_, err = d.refreshSearch(ctx)
	return err
}

var errDropped = fmt.Errorf("the index was dropped")

func findIndex(m metadata, name string) *indexMeta {
	for i := range m.Search {
		if m.Search[i].Def.Name == name {
			return &m.Search[i]
		}
	}
	return nil
}

// buildPartition writes ix's entries of every profile of part, under its
// lock; entries already there are written again, which changes nothing.
// An index dropped meanwhile is not written (errDropped): its cleaning,
// which reads a partition under the same lock once the drop is loaded,
// may have passed part already.
func (d *Directory) buildPartition(ctx context.Context, ix *searchIndex, part engine.Part) error {
	return d.withRetry(ctx, func() error {
		return d.engine.Invoke(ctx, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}, func(tx *engine.Tx) error {
			if cur := d.searchSet().get(ix.meta.Def.Name); cur == nil || !slices.Equal(cur.meta.Slots, ix.meta.Slots) {
				return errDropped
			}
			items, err := tx.Scan(part)
			if err != nil {
				return err
			}
			for _, it := range items {
				if err := tx.Reindex(part, it.Email, &it.Record, nil, ix.entries(it.Email, &it.Record)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// withRetry runs fn again after a lock conflict: background work yields
// to writers, and comes back.
func (d *Directory) withRetry(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if partmap.ErrorCode(err) != partmap.ELOCKCONFLICT || attempt == 50 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
}

// cleanDropped removes the entries of a dropped index, partition by
// partition, and then forgets its slots.
func (d *Directory) cleanDropped(ctx context.Context, name string, slots []int) error {
	meta, err := d.readMeta(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(meta.Dropping, func(x droppedSlots) bool { return x.Name == name && slices.Equal(x.Slots, slots) })
	if i < 0 {
		return nil
	}
	if err := d.settle(ctx); err != nil {
		return err
	}
	x := meta.Dropping[i]
	parts := meta.Partitions
	if x.Generation != meta.Generation {
		// A resize copied no entries of it: the old generation is gone.
		parts = 0
	}
	bulk := engine.Bulk(ctx)
	for p := 0; p < parts; p++ {
		part := engine.Part{Generation: x.Generation, Partition: partmap.Partition(p)}
		if err := d.cleanPartition(bulk, x.Slots, part); err != nil {
			return err
		}
	}
	_, err = d.updateMeta(ctx, func(m *metadata) error {
		m.Dropping = slices.DeleteFunc(m.Dropping, func(y droppedSlots) bool { return y.Name == name && slices.Equal(y.Slots, x.Slots) })
		if len(m.Search) == 0 && len(m.Dropping) == 0 && m.Schema == schemaSearch {
			// No search entry is left: an older partmap may open it again.
			m.Schema = schemaIndexes
		}
		return nil
	})
	return err
}

// cleanPartition reads the entries under part's lock, so that a build
// that wrote them before the drop was loaded has committed them.
func (d *Directory) cleanPartition(ctx context.Context, slots []int, part engine.Part) error {
	ranges := make([]engine.IndexRange, len(slots))
	for i, s := range slots {
		ranges[i] = engine.IndexRange{Part: part, Field: s}
	}
	return d.withRetry(ctx, func() error {
		return d.engine.Invoke(ctx, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}, func(tx *engine.Tx) error {
			found, err := d.searcher.IndexRanges(ctx, ranges)
			if err != nil {
				return err
			}
			byEmail := map[string][]engine.IndexEntry{}
			for _, es := range found {
				for _, e := range es {
					byEmail[e.Email] = append(byEmail[e.Email], e)
				}
			}
			emails := make([]string, 0, len(byEmail))
			for e := range byEmail {
				emails = append(emails, e)
			}
			slices.Sort(emails)
			for _, e := range emails {
				if err := tx.Reindex(part, e, nil, byEmail[e], nil); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// searchWorkPending refuses a resize while an index builds or a dropped
// one is being cleaned: both walk the partitions of one generation.
func searchWorkPending(m metadata) error {
	for _, x := range m.Search {
		if x.Build != nil {
			return partmap.Errorf(partmap.ECONFLICT, "search index %q is building (%d of %d partitions); resize once it has finished",
				x.Def.Name, x.Build.Built, m.Partitions)
		}
	}
	if len(m.Dropping) > 0 {
		return partmap.Errorf(partmap.ECONFLICT, "the entries of dropped search index %q are being removed; resize once that has finished", m.Dropping[0].Name)
	}
	return nil
}

// checked are the indexes whose entries part must hold: those built, and
// those building that have built part already.
func (s *searchSet) checked(part engine.Part) []*searchIndex {
	var out []*searchIndex
	for _, ix := range s.indexes {
		b := ix.meta.Build
		if !ix.legacy && (b == nil || (b.Generation == part.Generation && int(part.Partition) < b.Built)) {
			out = append(out, ix)
		}
	}
	return out
}

// cleaning are the entry fields of dropped indexes, whose entries are
// being removed, and of indexes this server has not heard of: the check
// leaves them out.
func (s *searchSet) cleaning() map[int]bool {
	used := map[int]bool{}
	for _, ix := range s.indexes {
		for i := range ix.fields {
			if !ix.legacy {
				used[ix.meta.Slots[i]] = true
				used[ix.sortSlot(i)] = true
			}
		}
	}
	out := map[int]bool{}
	for f := engine.SearchFieldBase; f <= engine.MaxSearchField; f++ {
		if !used[f] {
			out[f] = true
		}
	}
	return out
}

// slotName names an entry field in a drift report: "index.field", or
// "index.field (sort)".
func (s *searchSet) slotName(slot int) string {
	for _, ix := range s.indexes {
		for i, f := range ix.fields {
			switch {
			case ix.legacy:
			case ix.meta.Slots[i] == slot:
				return ix.meta.Def.Name + "." + f.Name
			case ix.sortSlot(i) == slot:
				return ix.meta.Def.Name + "." + f.Name + " (sort)"
			}
		}
	}
	return ""
}
