package search_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/search"
)

// desk is the schema of most tests: a support desk's customer profiles.
var desk = mustSchema([]search.Field{
	{Name: "fullName"},
	{Name: "notes"},
	{Name: "code", NoStem: true},
	{Name: "customerTier", Type: search.TypeTag, Sortable: true},
	{Name: "orders", Type: search.TypeNumeric, Sortable: true},
	{Name: "first name"}, // a name a query must escape
	{Name: "a\x01b"},     // and one it need not
}, search.Options{})

func mustSchema(fields []search.Field, opts search.Options) *search.Schema {
	s, err := search.NewSchema(fields, opts)
	if err != nil {
		panic(err)
	}
	return s
}

func TestNewSchema(t *testing.T) {
	text := search.Field{Name: "notes"}
	for _, tt := range []struct {
		name   string
		fields []search.Field
		opts   search.Options
		want   string // in the error message
	}{
		{"OK", []search.Field{text, {Name: "tier", Type: search.TypeTag}, {Name: "n", Type: search.TypeNumeric, Sortable: true}}, search.Options{}, ""},
		{"OKSeparator", []search.Field{text}, search.Options{Separator: ';'}, ""},
		{"OKNoStopwords", []search.Field{text}, search.Options{Stopwords: []string{}}, ""},
		{"OKFieldNameWithPunctuation", []search.Field{{Name: "name.first (legal)"}}, search.Options{}, ""},
		{"ErrNoFields", nil, search.Options{}, "at least one field"},
		{"ErrTooManyFields", slices.Repeat([]search.Field{text}, search.MaxFields+1), search.Options{}, "at most 128"},
		{"ErrEmptyName", []search.Field{{Name: ""}}, search.Options{}, "field name is empty"},
		{"ErrDuplicate", []search.Field{text, {Name: "notes", Type: search.TypeTag}}, search.Options{}, `"notes" is declared twice`},
		{"ErrInvalidUTF8", []search.Field{{Name: "a\xff"}}, search.Options{}, "not valid UTF-8"},
		{"ErrLongName", []search.Field{{Name: strings.Repeat("n", 1025)}}, search.Options{}, "longer than 1024 bytes"},
		{"ErrUnknownType", []search.Field{{Name: "x", Type: 7}}, search.Options{}, "unknown type 7"},
		{"ErrNoStemOnTag", []search.Field{{Name: "x", Type: search.TypeTag, NoStem: true}}, search.Options{}, "only a TEXT field takes NOSTEM"},
		{"ErrSeparatorSpace", []search.Field{text}, search.Options{Separator: ' '}, "separator"},
		{"ErrSeparatorBackslash", []search.Field{text}, search.Options{Separator: '\\'}, "separator"},
		{"ErrSeparatorControl", []search.Field{text}, search.Options{Separator: '\t'}, "separator"},
		{"ErrSeparatorNonASCII", []search.Field{text}, search.Options{Separator: 0xe9}, "separator"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := search.NewSchema(tt.fields, tt.opts)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				if got, want := s.Fields(), tt.fields; !slices.Equal(got, want) {
					t.Fatalf("got fields %v, want %v", got, want)
				}
				return
			}
			var e *partmap.Error
			if !errors.As(err, &e) || e.Code != partmap.EINVALID || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %v, want EINVALID saying %q", err, tt.want)
			}
		})
	}
}

// The schema keeps its own copies: a caller that changes what it passed
// or what it got changes nothing in the schema, which goroutines share.
func TestSchemaIsImmutable(t *testing.T) {
	fields := []search.Field{{Name: "notes"}}
	stop := []string{"foo"}
	s := mustSchema(fields, search.Options{Stopwords: stop})
	fields[0].Name = "changed"
	stop[0] = "bar"
	s.Fields()[0].Name = "changed too"
	s.Options().Stopwords[0] = "baz"
	if got, want := s.Terms("notes", "foo bar baz"), []string{"bar", "baz"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, want := s.Options().Separator, byte(','); got != want {
		t.Fatalf("got separator %q, want the default %q", got, want)
	}
}

func TestSchemaLookups(t *testing.T) {
	if f, ok := desk.Field("customerTier"); !ok || f.Type != search.TypeTag || !f.Sortable {
		t.Fatalf("got %+v, %v", f, ok)
	}
	if _, ok := desk.Field("nope"); ok {
		t.Fatal("found a field the schema lacks")
	}
	if got, want := desk.TextFields(), []string{"fullName", "notes", "code", "first name", "a\x01b"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := search.DefaultStopwords(); len(got) != 33 || !slices.Contains(got, "the") {
		t.Fatalf("got %q, want Redis's 33 stop words", got)
	}
	for typ, want := range map[search.Type]string{search.TypeText: "TEXT", search.TypeTag: "TAG", search.TypeNumeric: "NUMERIC", 9: "Type(9)"} {
		if got := typ.String(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}
