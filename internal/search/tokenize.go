package search

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// StemPrefix marks the stemmed form of a word among a field's terms, as
// RediSearch marks its stems with '+'. A control character cannot be in a
// word (tokenising drops them), so unlike Redis's '+' the mark never meets
// a word of the text, and a prefix query never reaches a stem.
const StemPrefix = "\x01"

// minStemLength is RediSearch's MINSTEMLEN default: shorter words are
// indexed without a stem. A query word is stemmed whatever its length, as
// in Redis.
const minStemLength = 4

// isSeparator reports whether r ends a word: white space, or the ASCII
// punctuation of RediSearch's src/toksep.h. Underscore and backslash (the
// escape) are not separators. Redis splits on space and tab only among
// white space; partmap splits on all of it.
func isSeparator(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiSeparator[r]
	}
	return unicode.IsSpace(r)
}

var asciiSeparator = func() (t [utf8.RuneSelf]bool) {
	for _, c := range " \t\n\v\f\r,./(){}[]:;~!@#$%^&*-=+|'`\"<>?" {
		t[c] = true
	}
	return t
}()

// isControl reports a character that a word drops, as RediSearch's
// normaliser does (C's iscntrl), white space aside, which separates.
func isControl(r rune) bool {
	return (r < ' ' || r == 0x7f) && !isSeparator(r)
}

// words splits text into its raw words: runs of characters between
// unescaped separators. A backslash makes the character after it part of
// the word, separator or not; words keep their backslashes for normalize.
func words(text string) []string {
	var out []string
	start, escaped := -1, false
	for i, r := range text {
		switch {
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case isSeparator(r):
			if start >= 0 {
				out = append(out, text[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, text[start:])
	}
	return out
}

// normalize turns a raw word into a term: escapes resolved (a backslash
// keeps the next character and is itself dropped, "\\" is one backslash, a
// trailing one vanishes), control characters dropped, Unicode lower case.
// It is the same for indexed text and for query words, so that they meet.
func normalize(raw string) string {
	if !strings.ContainsFunc(raw, func(r rune) bool { return r == '\\' || isControl(r) }) {
		return strings.ToLower(raw)
	}
	var b strings.Builder
	escaped := false
	for _, r := range raw {
		switch {
		case !escaped && r == '\\':
			escaped = true
			continue
		case isControl(r):
		default:
			b.WriteRune(r)
		}
		escaped = false
	}
	return strings.ToLower(b.String())
}

// stem is the Snowball English stem of a folded word, or "" when stemming
// leaves it as it is, or leaves nothing (the stemmer trims white space,
// which an escape can put in a word).
func stem(word string) string {
	if keepsForm(word) {
		return ""
	}
	if s, ok := stems.get(word); ok {
		return s
	}
	s := english.Stem(word, true)
	if s == word || s == "" {
		s = ""
	}
	stems.put(word, s)
	return s
}

// keepsForm reports, without running the stemmer, that it would leave
// word as it is: each of its rules takes off or changes an ending made of
// letters or apostrophes, so a word that ends in a digit keeps its form
// unless the stemmer's clean-up (of apostrophes and surrounding white
// space) changes it. Account numbers, codes and names with numbers are
// common in profiles, and each distinct one would be a miss of the cache.
func keepsForm(word string) bool {
	if word == "" {
		return false
	}
	last := word[len(word)-1]
	return last >= '0' && last <= '9' && strings.TrimSpace(word) == word &&
		!strings.ContainsAny(word, "'\u2018\u2019\u201b")
}

// stems remembers the stems of words met: names and words repeat from
// profile to profile, and the stemmer allocates on every call (a fifth
// of a write's indexing cost without this).
var stems stemCache

// stemCache is a bounded map, emptied when full: simpler than an LRU, and
// a word common enough to matter is back after one miss. Its reads take
// no lock, as every indexed write and query reads it from many goroutines.
type stemCache struct {
	m sync.Map // word → stem
	n atomic.Int64
}

const stemCacheWords = 1 << 16

func (c *stemCache) get(word string) (string, bool) {
	s, ok := c.m.Load(word)
	if !ok {
		return "", false
	}
	return s.(string), true
}

func (c *stemCache) put(word, s string) {
	if c.n.Add(1) > stemCacheWords {
		c.m.Clear()
		c.n.Store(0)
	}
	c.m.Store(word, s)
}

// Terms returns the index terms of a TEXT field's value, sorted and
// without repeats: each word, folded, that is not a stop word, and, unless
// the field is NOSTEM, StemPrefix and the word's stem for each word of 4
// bytes or more that stemming changes. It returns nil for a field that is
// not a TEXT field of the schema.
func (s *Schema) Terms(field, value string) []string {
	f, ok := s.Field(field)
	if !ok || f.Type != TypeText {
		return nil
	}
	var terms []string
	for _, raw := range words(value) {
		w := normalize(raw)
		if w == "" || s.isStopword(w) {
			continue
		}
		terms = append(terms, w)
		if !f.NoStem && len(w) >= minStemLength {
			if st := stem(w); st != "" {
				terms = append(terms, StemPrefix+st)
			}
		}
	}
	slices.Sort(terms)
	return slices.Compact(terms)
}

// Expand returns the index terms that a query word (a Term's Word) matches
// in a field: the word itself and, where the field stems, StemPrefix and
// the word's stem, and the stem as a word — RediSearch's query expansion.
// A Term matches a field's value iff one of these is among its Terms.
func (s *Schema) Expand(field, word string) []string {
	if !s.stems(field) {
		return []string{word}
	}
	st := stem(word)
	if st == "" {
		return []string{word, StemPrefix + word}
	}
	return []string{word, StemPrefix + st, st}
}

// Tags returns the tags of a TAG field's value, sorted and without
// repeats: the value split on the field's separator (unless the field is
// Whole), each part trimmed of white space and, unless the field or the
// schema is CaseSensitive, folded to lower case; empty parts are dropped.
// It returns nil for a field that is not a TAG field of the schema.
func (s *Schema) Tags(field, value string) []string {
	f, ok := s.Field(field)
	if !ok || f.Type != TypeTag {
		return nil
	}
	if f.Whole {
		if t := s.foldTag(field, value); t != "" {
			return []string{t}
		}
		return nil
	}
	sep := s.opts.Separator
	if f.Separator != 0 {
		sep = f.Separator
	}
	var tags []string
	for part := range strings.SplitSeq(value, string(sep)) {
		if t := s.foldTag(field, part); t != "" {
			tags = append(tags, t)
		}
	}
	slices.Sort(tags)
	return slices.Compact(tags)
}

// foldTag is the normal form of one tag of field, in values and queries
// alike. A Whole field keeps its value exactly, as an equality index does.
func (s *Schema) foldTag(field, t string) string {
	f, _ := s.Field(field)
	if f.Whole {
		return t
	}
	t = strings.TrimSpace(t)
	if !s.opts.CaseSensitive && !f.CaseSensitive {
		t = strings.ToLower(t)
	}
	return t
}
