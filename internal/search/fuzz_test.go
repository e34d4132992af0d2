package search_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/search"
)

// Parsing never panics; a query either fails with EINVALID or prints a
// canonical form that parses to the same tree, which Match can evaluate.
func FuzzParse(f *testing.F) {
	for _, q := range []string{
		"hello world", "a | b c", "-(a | -b)", "@notes:(run* | -x)", `@customerTier:{gold|new\ york}`,
		"@orders:[(1 +inf]", "@orders:[5]", "*", "( * )", "the", `a\-b\\c\`, "@first\\ name:x", `"a b"`,
		"(((a)))", "@orders:[1e+21 -0]", "ÉCOLE* ß", "a\x01b", "@customerTier:{ a\t b }", "\xff",
	} {
		f.Add(q)
	}
	profile := map[string]string{
		"fullName": "Ann Lee", "notes": "running late", "code": "x-1", "customerTier": "gold",
		"orders": "3", "first name": "ann",
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, err := search.Parse(desk, q)
		if err != nil {
			var e *partmap.Error
			if !errors.As(err, &e) || e.Code != partmap.EINVALID || e.Message == "" {
				t.Fatalf("%q: got %#v, want EINVALID with a message", q, err)
			}
			return
		}
		canon := n.String()
		again, err := search.Parse(desk, canon)
		if err != nil {
			t.Fatalf("%q → %q: %v", q, canon, err)
		}
		if !reflect.DeepEqual(again, n) {
			t.Fatalf("%q → %q → %#v, want %#v", q, canon, again, n)
		}
		if got := again.String(); got != canon {
			t.Fatalf("%q → %q → %q: not canonical", q, canon, got)
		}
		search.Match(desk, n, profile)
	})
}

// Tokenising never panics and gives sorted, distinct terms of valid UTF-8
// without control characters, each word of which a query finds.
func FuzzTerms(f *testing.F) {
	for _, v := range []string{"Hello, World!", `hello\-world`, "running cats", "ÉCOLE ß", "a\x01b\nc", `\`, "\xff"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, field := range []string{"notes", "code"} {
			terms := desk.Terms(field, value)
			if !slices.IsSorted(terms) || len(slices.Compact(slices.Clone(terms))) != len(terms) {
				t.Fatalf("%q: terms %q are not sorted and distinct", value, terms)
			}
			for _, term := range terms {
				word := strings.TrimPrefix(term, search.StemPrefix)
				if word == "" || !utf8.ValidString(word) || strings.ContainsFunc(word, control) {
					t.Fatalf("%q: term %q", value, term)
				}
				if word != term || !utf8.ValidString(value) {
					continue
				}
				n, err := search.Parse(desk, "@"+field+":"+escape(word))
				if err != nil || !search.Match(desk, n, map[string]string{field: value}) {
					t.Fatalf("%q: term %q: %v, %v", value, term, n, err)
				}
			}
		}
	})
}

// control is a character tokenising drops: C's iscntrl, white space aside.
func control(r rune) bool {
	return (r < ' ' || r == 0x7f) && !strings.ContainsRune(" \t\n\v\f\r", r)
}
