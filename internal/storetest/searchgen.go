package storetest

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"pgregory.net/rapid"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/search"
)

// The generators and the oracle of the search proofs (issue 36): index
// definitions over a few fields, values from a small vocabulary so that
// queries hit, queries drawn as trees and written out as text in the many
// ways the syntax allows, and the answer a store owes for each: the live
// profiles search.Match accepts, in the documented order.

// searchFields are the fields an index may declare; searchUnindexed is
// written too and never indexed.
var (
	searchFields    = []string{"a", "b", "c", "d"}
	searchUnindexed = "z"
)

// Vocabulary. Words fold, stem ("running" and "runs" to "run"), and
// include stop words; tags differ in case and hold spaces; numbers are
// spelled as strtod reads them, and some values are no number.
var (
	textWords = []string{"alice", "Alicia", "ali", "running", "runs", "run", "RUNNER", "the", "a", "gold", "new", "york", "café", "Émile", "x1", "7"}
	tagWords  = []string{"gold", "Gold", "silver", "vip", "new york", " b ", "x|y", "a;b"}
	numWords  = []string{"0", "7", "-1", "3.5", "12", "1e3", "007", "inf", "-inf", "abc", "", " 7", "+5", ".5", "1000", "7.0"}

	queryWords    = []string{"alice", "Alice", "ali", "run", "running", "runs", "runner", "the", "a", "gold", "new", "york", "café", "émile", "x1", "7", "nothing"}
	queryPrefixes = []string{"al", "ali", "ALI", "ru", "run", "go", "ne", "ca", "ém", "x1", "zz"}
	queryTags     = []string{"gold", "Gold", "silver", "vip", "new york", "b", "x|y", "a;b", "a", "none"}
	queryBounds   = []string{"-inf", "-1", "0", "3.5", "7", "12", "1000", "+inf", "inf"}
)

// genIndexDefinition draws a definition of one to four of searchFields,
// each TEXT (perhaps NOSTEM), TAG (a separator, perhaps CASESENSITIVE) or
// NUMERIC, perhaps SORTABLE, with the default stop words, none or a few.
func genIndexDefinition(rt *rapid.T, name string) partmap.IndexDefinition {
	def := partmap.IndexDefinition{Name: name}
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(searchFields), 1, len(searchFields), func(s string) string { return s }).Draw(rt, "indexFields")
	for _, f := range names {
		field := partmap.IndexField{Name: f, Sortable: rapid.Bool().Draw(rt, "sortable")}
		switch field.Type = rapid.SampledFrom([]string{partmap.IndexText, partmap.IndexTag, partmap.IndexNumeric, "text", "tag"}).Draw(rt, "type"); strings.ToUpper(field.Type) {
		case partmap.IndexText:
			field.NoStem = rapid.Bool().Draw(rt, "noStem")
		case partmap.IndexTag:
			field.Separator = rapid.SampledFrom([]string{"", ",", ";", "|"}).Draw(rt, "separator")
			field.CaseSensitive = rapid.Bool().Draw(rt, "caseSensitive")
		}
		def.Fields = append(def.Fields, field)
	}
	switch rapid.IntRange(0, 3).Draw(rt, "stopwords") {
	case 1:
		def.Stopwords = []string{} // STOPWORDS 0
	case 2:
		def.Stopwords = []string{"gold", "THE"}
	}
	return def
}

// schemaOf compiles def as the oracle reads it, independently of the
// directory's own compilation.
func schemaOf(def partmap.IndexDefinition) (*search.Schema, error) {
	var fields []search.Field
	for _, f := range def.Fields {
		sf := search.Field{Name: f.Name, Sortable: f.Sortable, NoStem: f.NoStem, CaseSensitive: f.CaseSensitive, Whole: f.Whole}
		switch strings.ToUpper(f.Type) {
		case partmap.IndexTag:
			sf.Type = search.TypeTag
		case partmap.IndexNumeric:
			sf.Type = search.TypeNumeric
		}
		if f.Separator != "" {
			sf.Separator = f.Separator[0]
		}
		fields = append(fields, sf)
	}
	return search.NewSchema(fields, search.Options{Stopwords: def.Stopwords})
}

// fieldsOfType returns def's fields of one type.
func fieldsOfType(def partmap.IndexDefinition, typ string) []string {
	var out []string
	for _, f := range def.Fields {
		if strings.ToUpper(f.Type) == typ {
			out = append(out, f.Name)
		}
	}
	return out
}

func typeOf(def partmap.IndexDefinition, field string) string {
	for _, f := range def.Fields {
		if f.Name == field {
			return strings.ToUpper(f.Type)
		}
	}
	return ""
}

// genSearchValue draws a value for field: mostly what its type indexes,
// sometimes what another type would, so that NUMERIC fields hold words
// and TEXT fields numbers.
func genSearchValue(rt *rapid.T, def partmap.IndexDefinition, field string) string {
	kind := typeOf(def, field)
	if rapid.IntRange(0, 4).Draw(rt, "otherKind") == 0 {
		kind = rapid.SampledFrom([]string{partmap.IndexText, partmap.IndexTag, partmap.IndexNumeric}).Draw(rt, "kind")
	}
	join := func(words []string, seps []string) string {
		parts := rapid.SliceOfN(rapid.SampledFrom(words), 1, 3).Draw(rt, "words")
		var b strings.Builder
		for i, p := range parts {
			if i > 0 {
				b.WriteString(rapid.SampledFrom(seps).Draw(rt, "sep"))
			}
			b.WriteString(p)
		}
		return b.String()
	}
	switch kind {
	case partmap.IndexNumeric:
		return rapid.SampledFrom(numWords).Draw(rt, "number")
	case partmap.IndexTag:
		return join(tagWords, []string{",", ";", "|", ", "})
	}
	return join(textWords, []string{" ", ", ", "-", ". ", "  ", "\t"})
}

// qnode is a query as the test draws it: a tree, written out by render
// and evaluated leaf by leaf by matches.
type qnode struct {
	kind   qkind
	field  string   // a leaf's or a scope's field; "" for words in every TEXT field
	values []string // tag values
	lo, hi string   // range bounds
	loEx   bool
	hiEx   bool
	single bool // [x] rather than [x x]
	word   string
	kids   []*qnode
	paren  bool // written in parentheses, which change nothing
}

type qkind int

const (
	qAll qkind = iota
	qTag
	qRange
	qTerm
	qPrefix
	qAnd
	qOr
	qNot
	qScope // @field:( words ) over a TEXT field
)

// genQuery draws a query over def: "*" now and then, else a tree of at
// most depth levels of AND, OR, NOT and field scopes over tags, ranges,
// words and prefixes.
func genQuery(rt *rapid.T, def partmap.IndexDefinition) *qnode {
	if rapid.IntRange(0, 9).Draw(rt, "star") == 0 {
		return &qnode{kind: qAll, paren: rapid.IntRange(0, 3).Draw(rt, "paren") == 0}
	}
	return genNode(rt, def, 3, "", false)
}

// genNode draws a node; in a scope (scope != "") only words, prefixes
// and their combinations.
func genNode(rt *rapid.T, def partmap.IndexDefinition, depth int, scope string, inScope bool) *qnode {
	tags, nums, texts := fieldsOfType(def, partmap.IndexTag), fieldsOfType(def, partmap.IndexNumeric), fieldsOfType(def, partmap.IndexText)
	kinds := []qkind{qTerm, qPrefix}
	if !inScope {
		if len(tags) > 0 {
			kinds = append(kinds, qTag, qTag)
		}
		if len(nums) > 0 {
			kinds = append(kinds, qRange, qRange)
		}
	}
	if depth > 0 {
		kinds = append(kinds, qAnd, qAnd, qOr, qOr, qNot)
		if !inScope && len(texts) > 0 {
			kinds = append(kinds, qScope)
		}
	}
	n := &qnode{kind: rapid.SampledFrom(kinds).Draw(rt, "node"), paren: rapid.IntRange(0, 5).Draw(rt, "paren") == 0}
	switch n.kind {
	case qTag:
		n.field = rapid.SampledFrom(tags).Draw(rt, "tagField")
		n.values = rapid.SliceOfNDistinct(rapid.SampledFrom(queryTags), 1, 3, func(s string) string { return s }).Draw(rt, "tags")
	case qRange:
		n.field = rapid.SampledFrom(nums).Draw(rt, "numField")
		lo, hi := rapid.SampledFrom(queryBounds).Draw(rt, "lo"), rapid.SampledFrom(queryBounds).Draw(rt, "hi")
		if bound(lo) > bound(hi) {
			lo, hi = hi, lo
		}
		n.lo, n.hi = lo, hi
		if lo == hi && rapid.Bool().Draw(rt, "single") {
			n.single = true
		} else {
			n.loEx, n.hiEx = rapid.Bool().Draw(rt, "loEx"), rapid.Bool().Draw(rt, "hiEx")
		}
	case qTerm, qPrefix:
		if !inScope && len(texts) > 0 && rapid.Bool().Draw(rt, "fielded") {
			n.field = rapid.SampledFrom(texts).Draw(rt, "textField")
		}
		if n.kind == qTerm {
			n.word = rapid.SampledFrom(queryWords).Draw(rt, "word")
		} else {
			n.word = rapid.SampledFrom(queryPrefixes).Draw(rt, "prefix")
		}
	case qAnd, qOr:
		for range rapid.IntRange(2, 3).Draw(rt, "kids") {
			n.kids = append(n.kids, genNode(rt, def, depth-1, scope, inScope))
		}
	case qNot:
		n.kids = []*qnode{genNode(rt, def, depth-1, scope, inScope)}
	case qScope:
		n.field = rapid.SampledFrom(texts).Draw(rt, "scopeField")
		n.kids = []*qnode{genNode(rt, def, depth-1, n.field, true)}
	}
	return n
}

func bound(s string) float64 {
	f, _ := search.ParseNumber(strings.TrimPrefix(s, "+"))
	if s == "+inf" {
		f, _ = search.ParseNumber("inf")
	}
	return f
}

// render writes n as query text, with its own choice of spacing.
func (n *qnode) render(rt *rapid.T) string {
	sp := func() string { return rapid.SampledFrom([]string{" ", " ", "  ", "\t"}).Draw(rt, "space") }
	opt := func() string { return rapid.SampledFrom([]string{"", "", " "}).Draw(rt, "optSpace") }
	var s string
	switch n.kind {
	case qAll:
		s = "*"
	case qTag:
		parts := make([]string, len(n.values))
		for i, v := range n.values {
			parts[i] = escapeTag(v, rapid.Bool().Draw(rt, "escapeSpace"))
		}
		s = "@" + n.field + ":{" + opt() + strings.Join(parts, opt()+"|"+opt()) + opt() + "}"
	case qRange:
		lo, hi := n.lo, n.hi
		if n.loEx {
			lo = "(" + lo
		}
		if n.hiEx {
			hi = "(" + hi
		}
		if n.single {
			s = "@" + n.field + ":[" + opt() + lo + opt() + "]"
		} else {
			s = "@" + n.field + ":[" + opt() + lo + sp() + hi + opt() + "]"
		}
	case qTerm, qPrefix:
		s = n.word
		if n.kind == qPrefix {
			s += "*"
		}
		if n.field != "" {
			s = "@" + n.field + ":" + s
		}
	case qAnd:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			parts[i] = k.render(rt)
			if k.kind == qOr && !k.paren {
				parts[i] = "(" + parts[i] + ")"
			}
		}
		s = strings.Join(parts, sp())
	case qOr:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			parts[i] = k.render(rt)
		}
		s = strings.Join(parts, opt()+"|"+opt())
	case qNot:
		k := n.kids[0]
		inner := k.render(rt)
		if (k.kind == qAnd || k.kind == qOr) && !k.paren {
			inner = "(" + inner + ")"
		}
		s = "-" + inner
	case qScope:
		s = "@" + n.field + ":(" + opt() + n.kids[0].render(rt) + opt() + ")"
	}
	if n.paren {
		s = "(" + s + ")"
	}
	return s
}

// escapeTag writes a tag for a query: punctuation escaped, spaces
// escaped or left as they are where that means the same (unescaped white
// space joins a tag's words with one space).
func escapeTag(v string, escapeSpace bool) string {
	if strings.ContainsAny(v, "\t\n") || strings.Contains(v, "  ") || strings.TrimSpace(v) != v {
		escapeSpace = true
	}
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == ' ' && !escapeSpace:
		case strings.ContainsRune(" ,./(){}[]:;~!@#$%^&*-=+|'`\"<>?\\", r):
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// leafText is a leaf alone as a query, its scope's field made explicit.
func (n *qnode) leafText(scope string) string {
	c := *n
	c.paren = false
	if c.field == "" {
		c.field = scope
	}
	if c.kind == qTag {
		parts := make([]string, len(c.values))
		for i, v := range c.values {
			parts[i] = escapeTag(v, true)
		}
		return "@" + c.field + ":{" + strings.Join(parts, "|") + "}"
	}
	var s string
	switch c.kind {
	case qRange:
		lo, hi := c.lo, c.hi
		if c.loEx {
			lo = "(" + lo
		}
		if c.hiEx {
			hi = "(" + hi
		}
		s = "[" + lo + " " + hi + "]"
		return "@" + c.field + ":" + s
	case qTerm:
		s = c.word
	case qPrefix:
		s = c.word + "*"
	}
	if c.field != "" {
		s = "@" + c.field + ":" + s
	}
	return s
}

// queryOracle answers queries over one index definition.
type queryOracle struct {
	def    partmap.IndexDefinition
	schema *search.Schema
	leaves map[string]search.Node // parsed leaves; nil for one that is only stop words
}

func newQueryOracle(t interface{ Fatalf(string, ...any) }, def partmap.IndexDefinition) *queryOracle {
	s, err := schemaOf(def)
	if err != nil {
		t.Fatalf("schema of %+v: %v", def, err)
	}
	return &queryOracle{def: def, schema: s, leaves: map[string]search.Node{}}
}

// stopWordsOnly is the parser's error for a query of stop words alone,
// which Redis leaves out of a larger one.
const stopWordsOnly = "nothing to search for"

// matches evaluates the tree n on a profile by parsing each leaf alone
// and combining their matches as the syntax says: a leaf of stop words is
// left out, and so is a combination of nothing but such leaves (dropped).
func (o *queryOracle) matches(t interface{ Fatalf(string, ...any) }, n *qnode, scope string, p map[string]string) (match, dropped bool) {
	switch n.kind {
	case qAll:
		return true, false
	case qAnd, qOr:
		all := true
		var got []bool
		for _, k := range n.kids {
			m, d := o.matches(t, k, scope, p)
			if !d {
				got = append(got, m)
				all = all && m
			}
		}
		if len(got) == 0 {
			return false, true
		}
		if n.kind == qAnd {
			return all, false
		}
		return slices.Contains(got, true), false
	case qNot:
		m, d := o.matches(t, n.kids[0], scope, p)
		return !m, d
	case qScope:
		return o.matches(t, n.kids[0], n.field, p)
	}
	text := n.leafText(scope)
	node, seen := o.leaves[text]
	if !seen {
		var err error
		node, err = search.Parse(o.schema, text)
		if err != nil && !strings.Contains(err.Error(), stopWordsOnly) {
			t.Fatalf("the leaf %q does not parse: %v", text, err)
		}
		o.leaves[text] = node
	}
	if node == nil {
		return false, true
	}
	return search.Match(o.schema, node, p), false
}

// expected is the answer owed to a search: every live profile the query
// matches, in the order the store documents (SORTBY's, or partition then
// email over partitions), or the error code owed.
func (o *queryOracle) expected(live map[string]partmap.Profile, node search.Node, opts partmap.SearchOptions, partitions int) ([]partmap.Profile, error) {
	var out []partmap.Profile
	for _, p := range live {
		if search.Match(o.schema, node, p) {
			out = append(out, p)
		}
	}
	if opts.SortBy != "" {
		order, err := o.schema.Order(opts.SortBy, opts.Descending)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(out, func(a, b partmap.Profile) int { return order(a, b) })
		return out, nil
	}
	slices.SortFunc(out, func(a, b partmap.Profile) int {
		return cmp.Or(cmp.Compare(partmap.PartitionOf(a.Email(), partitions), partmap.PartitionOf(b.Email(), partitions)),
			strings.Compare(a.Email(), b.Email()))
	})
	return out, nil
}

// wantHit is the hit a store owes for p under opts.
func wantHit(p partmap.Profile, opts partmap.SearchOptions) partmap.SearchHit {
	h := partmap.SearchHit{Email: p.Email()}
	switch {
	case opts.NoContent:
	case opts.Return != nil:
		for _, f := range opts.Return {
			if v, ok := p[f]; ok {
				h.Fields = append(h.Fields, partmap.FieldValue{Name: f, Value: v})
			}
		}
	default:
		for _, f := range slices.Sorted(func(yield func(string) bool) {
			for k := range p {
				if !yield(k) {
					return
				}
			}
		}) {
			h.Fields = append(h.Fields, partmap.FieldValue{Name: f, Value: p[f]})
		}
	}
	return h
}

func sameHit(a, b partmap.SearchHit) bool {
	return a.Email == b.Email && slices.Equal(a.Fields, b.Fields) // nil and empty alike
}

func showHits(hits []partmap.SearchHit) string {
	var b strings.Builder
	for i, h := range hits {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(h.Email)
		if len(h.Fields) > 0 {
			fmt.Fprintf(&b, "%v", h.Fields)
		}
	}
	return "[" + b.String() + "]"
}

// genSearchOptions draws SORTBY (any field of the index, now and then
// one it lacks), LIMIT, and RETURN or NOCONTENT.
func genSearchOptions(rt *rapid.T, def partmap.IndexDefinition) partmap.SearchOptions {
	var opts partmap.SearchOptions
	switch rapid.IntRange(0, 9).Draw(rt, "sortBy") {
	case 0, 1, 2, 3:
	case 4:
		opts.SortBy = searchUnindexed
	default:
		opts.SortBy = def.Fields[rapid.IntRange(0, len(def.Fields)-1).Draw(rt, "sortField")].Name
	}
	opts.Descending = opts.SortBy != "" && rapid.Bool().Draw(rt, "desc")
	opts.Offset = rapid.SampledFrom([]int{0, 0, 0, 1, 2, 4}).Draw(rt, "offset")
	opts.Limit = rapid.SampledFrom([]int{0, -1, 1, 2, 3, 10}).Draw(rt, "limit")
	switch rapid.IntRange(0, 3).Draw(rt, "content") {
	case 1:
		opts.NoContent = true
	case 2:
		opts.Return = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "z", partmap.FieldEmail, "q"}), 1, 3, func(s string) string { return s }).Draw(rt, "return")
	}
	return opts
}

// offsetRE finds where an error says a query went wrong.
var offsetRE = regexp.MustCompile(`offset (\d+)`)

// errorOffset returns the offset an error message names, or -1.
func errorOffset(msg string) int {
	m := offsetRE.FindStringSubmatch(msg)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// corrupt damages a query: something the syntax refuses, put somewhere.
func corrupt(rt *rapid.T, q string) string {
	bad := rapid.SampledFrom([]string{"(", ")", "{", "}", "[", "]", "@", "@q:x", "@a:", `"`, "~", "%", "$p", "*", "x*", "-", "|", "@a:[1", "@a:[x y]", "@a:[5 1]", "@a:{}", ":"}).Draw(rt, "bad")
	at := rapid.IntRange(0, len(q)).Draw(rt, "at")
	for at > 0 && at < len(q) && (q[at]&0xc0) == 0x80 { // not inside a character
		at--
	}
	return q[:at] + bad + q[at:]
}
