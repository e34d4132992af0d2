package search

import (
	"math"
	"strconv"
	"strings"
)

// Node is a parsed query: one of All, Tag, Range, Term, Prefix, And, Or and
// Not, each a plain value that a planner can walk with a type switch.
// String gives the canonical query text, which Parse reads back to an
// equal Node.
type Node interface {
	String() string
	node()
}

// All matches every profile: the query "*".
type All struct{}

// Tag matches a profile whose TAG field holds any of Values, which are in
// normal form (trimmed, and folded unless the schema is CaseSensitive):
// "@f:{a|b}".
type Tag struct {
	Field  string
	Values []string
}

// Range matches a profile whose NUMERIC field holds a number from Min to
// Max; an exclusive bound is left out: "@f:[(1 5]". The bounds may be
// infinite, never NaN, and Min <= Max.
type Range struct {
	Field                      string
	Min, Max                   float64
	MinExclusive, MaxExclusive bool
}

// Term matches a profile one of whose index terms (Schema.Terms) is among
// the word's expansion (Schema.Expand) in Field, or in any TEXT field when
// Field is "". Word is normalised as indexed words are: folded, escapes
// resolved, never a stop word.
type Term struct {
	Field string
	Word  string
}

// Prefix matches a profile one of whose words (not stems) in Field, or in
// any TEXT field when Field is "", starts with Prefix, which is normalised
// as a Term's Word and is at least MinPrefix characters long: "pre*".
type Prefix struct {
	Field  string
	Prefix string
}

// And matches a profile that every node matches: juxtaposition. It has at
// least two nodes, none of them an And.
type And struct{ Nodes []Node }

// Or matches a profile that any node matches: "a | b". It has at least
// two nodes, none of them an Or.
type Or struct{ Nodes []Node }

// Not matches a profile that Node does not: "-a". Node is never a Not.
type Not struct{ Node Node }

func (All) node()    {}
func (Tag) node()    {}
func (Range) node()  {}
func (Term) node()   {}
func (Prefix) node() {}
func (And) node()    {}
func (Or) node()     {}
func (Not) node()    {}

func (All) String() string { return "*" }

func (n Tag) String() string {
	var b strings.Builder
	writeField(&b, n.Field)
	b.WriteByte('{')
	for i, v := range n.Values {
		if i > 0 {
			b.WriteByte('|')
		}
		writeEscaped(&b, v)
	}
	b.WriteByte('}')
	return b.String()
}

func (n Range) String() string {
	var b strings.Builder
	writeField(&b, n.Field)
	b.WriteByte('[')
	if n.MinExclusive {
		b.WriteByte('(')
	}
	b.WriteString(formatBound(n.Min))
	b.WriteByte(' ')
	if n.MaxExclusive {
		b.WriteByte('(')
	}
	b.WriteString(formatBound(n.Max))
	b.WriteByte(']')
	return b.String()
}

func (n Term) String() string {
	var b strings.Builder
	writeField(&b, n.Field)
	writeEscaped(&b, n.Word)
	return b.String()
}

func (n Prefix) String() string {
	var b strings.Builder
	writeField(&b, n.Field)
	writeEscaped(&b, n.Prefix)
	b.WriteByte('*')
	return b.String()
}

func (n And) String() string {
	parts := make([]string, len(n.Nodes))
	for i, c := range n.Nodes {
		parts[i] = c.String()
		if _, ok := c.(Or); ok {
			parts[i] = "(" + parts[i] + ")"
		}
	}
	return strings.Join(parts, " ")
}

func (n Or) String() string {
	parts := make([]string, len(n.Nodes))
	for i, c := range n.Nodes {
		parts[i] = c.String()
	}
	return strings.Join(parts, " | ")
}

func (n Not) String() string {
	switch n.Node.(type) {
	case And, Or:
		return "-(" + n.Node.String() + ")"
	}
	return "-" + n.Node.String()
}

// writeField writes "@field:", or nothing for all TEXT fields.
func writeField(b *strings.Builder, field string) {
	if field == "" {
		return
	}
	b.WriteByte('@')
	writeEscaped(b, field)
	b.WriteByte(':')
}

// writeEscaped writes s with a backslash before each character that would
// otherwise end a word or mean something in a query.
func writeEscaped(b *strings.Builder, s string) {
	for _, r := range s {
		if r == '\\' || isSeparator(r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
}

func formatBound(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
