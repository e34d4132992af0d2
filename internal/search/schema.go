package search

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// Type is how a field's values are indexed. The zero Type is TEXT, as the
// zero of every option means its default.
type Type int

const (
	TypeText    Type = iota // words: tokenised, folded, stop words dropped, stemmed
	TypeTag                 // exact values, a separated list of them
	TypeNumeric             // a number, for ranges and sorting
)

// String is the type's name in FT.CREATE.
func (t Type) String() string {
	switch t {
	case TypeText:
		return "TEXT"
	case TypeTag:
		return "TAG"
	case TypeNumeric:
		return "NUMERIC"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Field declares one indexed profile field.
type Field struct {
	Name string
	Type Type
	// Sortable is Redis's SORTABLE: SORTBY on the field is expected to be
	// fast. This package records it; Order sorts by any field of the
	// schema, as FT.SEARCH does.
	Sortable bool
	// NoStem is Redis's NOSTEM, for TEXT fields only: the field indexes its
	// words as they are, and a query word matches only itself there.
	NoStem bool
	// Separator, CaseSensitive (TAG only) are Redis's per-field SEPARATOR
	// and CASESENSITIVE; a zero Separator is the schema's (Options).
	// Whole (TAG only) keeps a value as one tag, exactly as written, not
	// split, trimmed or folded: the equality indexes of old directories.
	Separator     byte
	CaseSensitive bool
	Whole         bool
}

// Options are the index-wide settings of a schema. The zero Options are
// Redis's defaults.
type Options struct {
	// Stopwords are the words TEXT fields and queries leave out. Nil is
	// Redis's default list (DefaultStopwords()); an empty, non-nil list is
	// none (STOPWORDS 0). Words are folded to lower case.
	Stopwords []string
	// Separator splits a TAG value into tags: one printable ASCII
	// character other than space and backslash. Zero is ','.
	Separator byte
	// CaseSensitive keeps the case of TAG values (Redis's CASESENSITIVE).
	// False folds tags to lower case, in values and in queries alike.
	CaseSensitive bool
}

// DefaultStopwords returns Redis's default stop-word list (RediSearch's
// src/stopwords.h), which nil Options.Stopwords mean.
func DefaultStopwords() []string { return slices.Clone(defaultStopwords) }

var defaultStopwords = []string{
	"a", "is", "the", "an", "and", "are", "as", "at", "be", "but", "by", "for",
	"if", "in", "into", "it", "no", "not", "of", "on", "or", "such", "that", "their",
	"then", "there", "these", "they", "this", "to", "was", "will", "with",
}

var defaultStopSet = stopSet(defaultStopwords)

func stopSet(words []string) map[string]bool {
	set := make(map[string]bool, len(words))
	for _, w := range words {
		set[strings.ToLower(w)] = true
	}
	return set
}

// Schema is a validated index declaration. It never changes once made, so
// one schema serves any number of goroutines.
type Schema struct {
	fields []Field
	byName map[string]int
	text   []string // names of the TEXT fields, in declared order
	opts   Options
	stop   map[string]bool
}

// MaxFields bounds a schema, as Redis bounds the TEXT fields of an index
// by its field mask: each indexed field costs every write an update.
const MaxFields = 128

// NewSchema validates fields and options and returns the schema. Every
// error is EINVALID.
func NewSchema(fields []Field, opts Options) (*Schema, error) {
	if len(fields) == 0 {
		return nil, partmap.Errorf(partmap.EINVALID, "a schema needs at least one field")
	}
	if len(fields) > MaxFields {
		return nil, partmap.Errorf(partmap.EINVALID, "a schema has %d fields; at most %d", len(fields), MaxFields)
	}
	s := &Schema{fields: slices.Clone(fields), byName: make(map[string]int, len(fields)), opts: opts}
	for i, f := range fields {
		if err := checkFieldName(f.Name); err != nil {
			return nil, err
		}
		if _, dup := s.byName[f.Name]; dup {
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
				Message: fmt.Sprintf("field %q is declared twice", f.Name)}
		}
		switch f.Type {
		case TypeText:
			s.text = append(s.text, f.Name)
		case TypeTag, TypeNumeric:
			if f.Type == TypeNumeric && (f.Separator != 0 || f.CaseSensitive || f.Whole) {
				return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
					Message: fmt.Sprintf("field %q is NUMERIC: only a TAG field takes SEPARATOR or CASESENSITIVE", f.Name)}
			}
			if c := f.Separator; c != 0 && (c <= ' ' || c >= 0x7f || c == '\\') {
				return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
					Message: fmt.Sprintf("tag separator %q must be one printable ASCII character other than space and backslash", c)}
			}
			if f.NoStem {
				return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
					Message: fmt.Sprintf("field %q is %s: only a TEXT field takes NOSTEM", f.Name, f.Type)}
			}
		default:
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: f.Name,
				Message: fmt.Sprintf("field %q has unknown type %d: want TEXT, TAG or NUMERIC", f.Name, int(f.Type))}
		}
		s.byName[f.Name] = i
	}
	switch c := opts.Separator; {
	case c == 0:
		s.opts.Separator = ','
	case c <= ' ' || c >= 0x7f || c == '\\':
		// A space would be trimmed away before it could split, and a
		// backslash is the query's escape.
		return nil, partmap.Errorf(partmap.EINVALID, "tag separator %q must be one printable ASCII character other than space and backslash", c)
	}
	switch {
	case opts.Stopwords == nil:
		s.stop = defaultStopSet
	default:
		s.stop = stopSet(opts.Stopwords)
		s.opts.Stopwords = slices.Clone(opts.Stopwords)
	}
	return s, nil
}

// checkFieldName accepts what a profile may name a field. A query can
// name any of them, escaping its punctuation and white space.
func checkFieldName(name string) error {
	switch {
	case name == "":
		return partmap.Errorf(partmap.EINVALID, "a field name is empty")
	case !utf8.ValidString(name):
		return partmap.Errorf(partmap.EINVALID, "field name %q is not valid UTF-8", name)
	case len(name) > partmap.DefaultLimits.MaxFieldNameBytes:
		return partmap.Errorf(partmap.EINVALID, "field name %.20q… is longer than %d bytes", name, partmap.DefaultLimits.MaxFieldNameBytes)
	}
	return nil
}

// Fields returns the declared fields in their declared order.
func (s *Schema) Fields() []Field { return slices.Clone(s.fields) }

// Field returns the declaration of the named field.
func (s *Schema) Field(name string) (Field, bool) {
	i, ok := s.byName[name]
	if !ok {
		return Field{}, false
	}
	return s.fields[i], true
}

// TextFields returns the names of the TEXT fields, which a query word
// without a field searches.
func (s *Schema) TextFields() []string { return slices.Clone(s.text) }

// Options returns the schema's options with defaults filled in: the
// separator is never 0, and nil Stopwords still means the default list.
func (s *Schema) Options() Options {
	o := s.opts
	o.Stopwords = slices.Clone(o.Stopwords)
	return o
}

// isStopword reports whether a folded word is one of the schema's stop
// words.
func (s *Schema) isStopword(word string) bool { return s.stop[word] }

// stems reports whether words of the named field are stemmed.
func (s *Schema) stems(field string) bool {
	f, ok := s.Field(field)
	return ok && f.Type == TypeText && !f.NoStem
}
