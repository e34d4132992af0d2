package search

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// Limits of a query. A query is text a user typed; the limits keep its
// parse and its evaluation small whatever it holds.
const (
	// MaxQueryBytes bounds a query's length.
	MaxQueryBytes = 4096
	// MaxDepth bounds how deep parentheses and negations nest, so that
	// neither parsing nor evaluation can exhaust a stack. RediSearch's
	// parser stops at a stack of 256 entries, about a hundred levels.
	MaxDepth = 100
	// MinPrefix is the fewest characters a prefix may have before its *:
	// RediSearch's MINPREFIX default.
	MinPrefix = 2
)

// Parse reads a query in RediSearch's query syntax (DIALECT 2), the subset
// that profiles need, against a schema:
//
//	word            the word in any TEXT field
//	pre*            a word of any TEXT field starting with pre
//	@f:word         the word in TEXT field f; also @f:pre*, @f:-word,
//	                @f:(a b), @f:(a | -b*)
//	@f:{a | b}      TAG field f holds a or b; escape punctuation and
//	                spaces inside a tag with a backslash: {a\-b}, {new\ york}
//	@f:[lo hi]      NUMERIC field f holds lo <= x <= hi; "(" before a bound
//	                excludes it, -inf, +inf and inf are bounds; @f:[x] is x
//	a b             both (AND); binds tighter than |
//	a | b           either (OR)
//	-a              not a
//	(a b)           grouping
//	*               every profile (alone)
//
// Words are tokenised as TEXT values are (Terms): a query word is split on
// the same separators, folded and, where a field stems, expanded to its
// stem; a stop word in a query is dropped, as Redis drops it, and a query
// left with nothing is an error. Every error is a *partmap.Error with code
// EINVALID whose message says where the query went wrong, in Redis's
// words where Redis has them ("Syntax error at offset 4 near foo").
func Parse(s *Schema, q string) (Node, error) {
	if len(q) > MaxQueryBytes {
		return nil, partmap.Errorf(partmap.EINVALID, "query is %d bytes; the limit is %d", len(q), MaxQueryBytes)
	}
	if !utf8.ValidString(q) {
		at := 0
		for at < len(q) {
			r, size := utf8.DecodeRuneInString(q[at:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			at += size
		}
		return nil, partmap.Errorf(partmap.EINVALID, "query is not valid UTF-8 at offset %d", at)
	}
	p := &parser{s: s, q: q}
	p.skipSpace()
	if p.eof() {
		return nil, partmap.Errorf(partmap.EINVALID, "query is empty: * matches every profile")
	}
	if p.star() {
		return All{}, nil
	}
	n, err := p.union("")
	if err != nil {
		return nil, err
	}
	if !p.eof() { // union stops at | and ) only, and takes every |
		return nil, p.syntaxError(p.pos, "this ) closes nothing")
	}
	if n == nil {
		return nil, partmap.Errorf(partmap.EINVALID, "query has nothing to search for: its words are stop words, which are not indexed")
	}
	return n, nil
}

type parser struct {
	s     *Schema
	q     string
	pos   int
	depth int
}

func (p *parser) eof() bool { return p.pos >= len(p.q) }

func (p *parser) peek() rune {
	if p.eof() {
		return 0
	}
	r, _ := utf8.DecodeRuneInString(p.q[p.pos:])
	return r
}

// silent is the punctuation that means nothing in a query: like white
// space it only separates words, as RediSearch's lexer skips it.
const silent = ".,/#&^+?`"

// skipSpace passes white space and silent punctuation.
func (p *parser) skipSpace() {
	for !p.eof() {
		r := p.peek()
		if !unicode.IsSpace(r) && !strings.ContainsRune(silent, r) {
			return
		}
		p.pos += utf8.RuneLen(r)
	}
}

// skipWhite passes white space only: around a field's colon and inside
// a range, where punctuation is a mistake to report, not to pass over.
func (p *parser) skipWhite() {
	for !p.eof() && unicode.IsSpace(p.peek()) {
		p.pos += utf8.RuneLen(p.peek())
	}
}

// star reports, and consumes, a query that is "*" alone, perhaps in
// parentheses, as RediSearch's grammar allows it only there.
func (p *parser) star() bool {
	i, open := p.pos, 0
	skip := func() {
		for i < len(p.q) && isASCIISpace(p.q[i]) {
			i++
		}
	}
	for ; i < len(p.q) && p.q[i] == '('; open++ {
		i++
		skip()
	}
	if i >= len(p.q) || p.q[i] != '*' {
		return false
	}
	i++
	skip()
	for ; open > 0 && i < len(p.q) && p.q[i] == ')'; open-- {
		i++
		skip()
	}
	if open > 0 || i < len(p.q) {
		return false
	}
	p.pos = i
	return true
}

func isASCIISpace(c byte) bool { return c < utf8.RuneSelf && unicode.IsSpace(rune(c)) }

// union reads intersections separated by |. field is "" at the top level
// and the TEXT field inside @field:( ... ), where only words may appear.
// A nil Node is a part made only of stop words: Redis leaves it out.
func (p *parser) union(field string) (Node, error) {
	var nodes []Node
	for {
		n, err := p.intersection(field)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
		p.skipSpace()
		if p.peek() != '|' {
			break
		}
		p.pos++
	}
	return combine(nodes, func(ns []Node) Node { return Or{ns} }, func(n Node) ([]Node, bool) {
		o, ok := n.(Or)
		return o.Nodes, ok
	}), nil
}

// intersection reads juxtaposed unary expressions up to |, ) or the end.
func (p *parser) intersection(field string) (Node, error) {
	var nodes []Node
	for {
		p.skipSpace()
		if r := p.peek(); p.eof() || r == '|' || r == ')' {
			break
		}
		n, err := p.unary(field)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, p.syntaxError(p.pos, "an expression is missing")
	}
	return combine(nodes, func(ns []Node) Node { return And{ns} }, func(n Node) ([]Node, bool) {
		a, ok := n.(And)
		return a.Nodes, ok
	}), nil
}

// combine joins the non-nil nodes with make, taking the nodes of children
// of the same kind into the parent, so that And and Or are flat.
func combine(nodes []Node, make func([]Node) Node, same func(Node) ([]Node, bool)) Node {
	var kept []Node
	for _, n := range nodes {
		switch inner, ok := same(n); {
		case n == nil:
		case ok:
			kept = append(kept, inner...)
		default:
			kept = append(kept, n)
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return make(kept)
}

// negate is RediSearch's NOT, less a double negation, as RediSearch drops
// it too.
func negate(n Node) Node {
	switch n := n.(type) {
	case nil:
		return nil
	case Not:
		return n.Node
	}
	return Not{n}
}

func (p *parser) enter(at int) error {
	p.depth++
	if p.depth > MaxDepth {
		return partmap.Errorf(partmap.EINVALID, "Parser stack overflow at offset %d: at most %d parentheses and negations may nest", at, MaxDepth)
	}
	return nil
}

func (p *parser) unary(field string) (Node, error) {
	p.skipSpace()
	if p.peek() != '-' {
		return p.atom(field)
	}
	if err := p.enter(p.pos); err != nil {
		return nil, err
	}
	p.pos++
	p.skipSpace()
	if r := p.peek(); p.eof() || r == '|' || r == ')' {
		return nil, p.syntaxError(p.pos, "- must come before what it negates")
	}
	n, err := p.unary(field)
	p.depth--
	return negate(n), err
}

func (p *parser) atom(field string) (Node, error) {
	at := p.pos
	switch r := p.peek(); {
	case r == '(':
		return p.group(field)
	case r == '@' && field == "":
		return p.modifier()
	case r == '@':
		return nil, p.syntaxError(at, "a field cannot be named inside @"+field+":( )")
	case r == '*':
		if next, _ := utf8.DecodeRuneInString(p.q[p.pos+1:]); p.pos+1 < len(p.q) && (next == '\\' || !isSeparator(next)) {
			return nil, p.syntaxError(at, "suffix and infix queries (*word) are not supported")
		}
		return nil, p.syntaxError(at, "* matches every profile only as the whole query")
	case r == '"':
		return nil, p.syntaxError(at, "exact phrases are not supported; without the quotes the query matches profiles that have every word")
	case r == '~':
		return nil, p.syntaxError(at, "optional terms (~) are not supported")
	case r == '%':
		return nil, p.syntaxError(at, "fuzzy matching (%) is not supported")
	case r == '$':
		return nil, p.syntaxError(at, "query parameters ($) are not supported")
	case r == '{' || r == '[':
		return nil, p.syntaxError(at, "a tag list or a range needs a field before it: @field:{...}, @field:[...]")
	case r == '\\' || !isSeparator(r):
		return p.word(field)
	}
	return nil, p.syntaxError(at, "")
}

// group reads ( union ).
func (p *parser) group(field string) (Node, error) {
	open := p.pos
	if err := p.enter(open); err != nil {
		return nil, err
	}
	p.pos++
	n, err := p.union(field)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.peek() != ')' {
		return nil, p.syntaxError(p.pos, fmt.Sprintf("the ( at offset %d is not closed", open))
	}
	p.pos++
	p.depth--
	return n, nil
}

// rawWord passes the characters of a word: up to an unescaped separator.
func (p *parser) rawWord() string {
	start, escaped := p.pos, false
	for !p.eof() {
		r := p.peek()
		if !escaped && r != '\\' && isSeparator(r) {
			break
		}
		escaped = !escaped && r == '\\'
		p.pos += utf8.RuneLen(r)
	}
	return p.q[start:p.pos]
}

// word reads a word or, with a * right after it, a prefix.
func (p *parser) word(field string) (Node, error) {
	at := p.pos
	raw := p.rawWord()
	if p.peek() == '*' {
		p.pos++
		prefix := normalize(raw)
		if utf8.RuneCountInString(prefix) < MinPrefix {
			return nil, partmap.Errorf(partmap.EINVALID, "Prefix too short at offset %d near %s*: a prefix needs at least %d characters before the *", at, raw, MinPrefix)
		}
		return Prefix{Field: field, Prefix: prefix}, nil
	}
	w := normalize(raw)
	if w == "" || p.s.isStopword(w) {
		return nil, nil
	}
	return Term{Field: field, Word: w}, nil
}

// modifier reads @field: and what the field's type takes after it.
func (p *parser) modifier() (Node, error) {
	at := p.pos
	p.pos++
	raw := p.rawWord()
	if raw == "" {
		return nil, p.syntaxError(at, "@ must start a field name")
	}
	name := unescape(raw)
	f, ok := p.s.Field(name)
	if !ok {
		return nil, partmap.Errorf(partmap.EINVALID, "Unknown field at offset %d near %s", at, raw)
	}
	p.skipWhite()
	if p.peek() != ':' {
		return nil, p.syntaxError(p.pos, "a : must follow @"+raw)
	}
	p.pos++
	p.skipWhite()
	want := TypeText
	switch p.peek() {
	case '{':
		want = TypeTag
	case '[':
		want = TypeNumeric
	}
	if f.Type != want {
		return nil, partmap.Errorf(partmap.EINVALID, "Expected a %s field at offset %d near %s: %s is a %s field", want, at, raw, raw, f.Type)
	}
	switch want {
	case TypeTag:
		return p.tags(name)
	case TypeNumeric:
		return p.numericRange(name)
	}
	p.skipSpace()
	if r := p.peek(); p.eof() || r == '|' || r == ')' {
		return nil, p.syntaxError(p.pos, "a word, a prefix or a ( must follow @"+raw+":")
	}
	return p.unary(name)
}

// unescape drops the backslash of each escape, as field names are read.
func unescape(raw string) string {
	if !strings.Contains(raw, `\`) {
		return raw
	}
	var b strings.Builder
	escaped := false
	for _, r := range raw {
		if !escaped && r == '\\' {
			escaped = true
			continue
		}
		b.WriteRune(r)
		escaped = false
	}
	return b.String()
}

// tags reads {tag | tag ...} after @field:. Unescaped white space inside
// a tag joins its words with one space; punctuation must be escaped.
func (p *parser) tags(field string) (Node, error) {
	open := p.pos
	p.pos++
	var values []string
	for {
		var b strings.Builder
		space, escaped := false, false
	tag:
		for {
			if p.eof() {
				return nil, p.syntaxError(p.pos, fmt.Sprintf("the { at offset %d is not closed", open))
			}
			at, r := p.pos, p.peek()
			p.pos += utf8.RuneLen(r)
			switch {
			case escaped && isControl(r):
				space, escaped = true, false
			case escaped:
				escaped = false
				b.WriteString(pending(&space, &b))
				b.WriteRune(r)
			case r == '\\':
				escaped = true
			case r == '|' || r == '}':
				p.pos = at
				break tag
			case unicode.IsSpace(r) || isControl(r):
				space = true
			case r == '*':
				return nil, p.syntaxError(at, "prefix matching of tags is not supported")
			case isSeparator(r):
				return nil, p.syntaxError(at, "escape punctuation in a tag with a backslash")
			default:
				b.WriteString(pending(&space, &b))
				b.WriteRune(r)
			}
		}
		v := p.s.foldTag(field, b.String())
		if v == "" {
			return nil, p.syntaxError(p.pos, "a tag is empty")
		}
		if !slices.Contains(values, v) {
			values = append(values, v)
		}
		if p.peek() == '}' {
			p.pos++
			return Tag{Field: field, Values: values}, nil
		}
		p.pos++ // |
	}
}

// pending is the one space that white space before a tag's next
// character leaves, if the tag has begun.
func pending(space *bool, b *strings.Builder) string {
	sp := *space && b.Len() > 0
	*space = false
	if sp {
		return " "
	}
	return ""
}

// numericRange reads [lo hi] or [x] after @field:.
func (p *parser) numericRange(field string) (Node, error) {
	open := p.pos
	p.pos++
	p.skipWhite()
	lo, loEx, err := p.bound()
	if err != nil {
		return nil, err
	}
	p.skipWhite()
	n := Range{Field: field, Min: lo, Max: lo, MinExclusive: loEx, MaxExclusive: loEx}
	if p.peek() != ']' {
		if n.Max, n.MaxExclusive, err = p.bound(); err != nil {
			return nil, err
		}
		p.skipWhite()
	} else if loEx {
		return nil, p.syntaxError(p.pos, "a range of one number cannot exclude it")
	}
	if p.peek() != ']' {
		return nil, p.syntaxError(p.pos, fmt.Sprintf("the [ at offset %d is not closed", open))
	}
	p.pos++
	if n.Min > n.Max {
		return nil, partmap.Errorf(partmap.EINVALID, "Invalid numeric range (min > max) at offset %d: %s", open, n)
	}
	return n, nil
}

// bound reads a range bound: a number as ParseNumber reads one, or an
// infinity, after an optional ( that excludes it.
func (p *parser) bound() (float64, bool, error) {
	exclusive := p.peek() == '('
	if exclusive {
		p.pos++
	}
	at := p.pos
	for !p.eof() {
		r := p.peek()
		if unicode.IsSpace(r) || strings.ContainsRune("[]()", r) {
			break
		}
		p.pos += utf8.RuneLen(r)
	}
	f, ok := ParseNumber(p.q[at:p.pos])
	if !ok {
		return 0, false, p.syntaxError(at, "a range bound must be a number, -inf or +inf")
	}
	if f == 0 {
		f = 0 // -0 bounds as 0 does; one spelling for both
	}
	return f, exclusive, nil
}

// syntaxError is RediSearch's "Syntax error at offset N near X", X being
// the word or character at that offset, with a hint after it.
func (p *parser) syntaxError(at int, hint string) error {
	msg := fmt.Sprintf("Syntax error at offset %d near %s", at, p.near(at))
	if hint != "" {
		msg += ": " + hint
	}
	return partmap.Errorf(partmap.EINVALID, "%s", msg)
}

// near is the text a syntax error quotes: the word starting at offset at,
// or its one character, or the end.
func (p *parser) near(at int) string {
	if at >= len(p.q) {
		return "end of query"
	}
	r, size := utf8.DecodeRuneInString(p.q[at:])
	if r != '\\' && isSeparator(r) {
		return p.q[at : at+size]
	}
	sub := parser{q: p.q, pos: at}
	return sub.rawWord()
}
