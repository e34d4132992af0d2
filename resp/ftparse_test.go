package resp

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// splitLine splits a command written with its arguments separated by
// spaces; two single quotes are an empty argument.
func splitLine(line string) [][]byte {
	args := bytes.Fields([]byte(line))
	for i, a := range args {
		if string(a) == "''" {
			args[i] = []byte{}
		}
	}
	return args
}

// FT.CREATE's arguments become an index definition, or Redis's refusal,
// or a refusal that names what partmap does not support.
func TestParseFTCreate(t *testing.T) {
	text := func(name string) partmap.IndexField { return partmap.IndexField{Name: name, Type: partmap.IndexText} }
	for _, tc := range []struct {
		line string
		want partmap.IndexDefinition
		err  string
	}{
		{line: "ft.create idx SCHEMA name TEXT", want: partmap.IndexDefinition{Name: "idx", Fields: []partmap.IndexField{text("name")}}},
		{line: "ft.create idx on hash prefix 1 '' stopwords 0 schema name text nostem sortable tier TAG SEPARATOR ; CASESENSITIVE SORTABLE n NUMERIC SORTABLE",
			want: partmap.IndexDefinition{Name: "idx", Stopwords: []string{}, Fields: []partmap.IndexField{
				{Name: "name", Type: partmap.IndexText, NoStem: true, Sortable: true},
				{Name: "tier", Type: partmap.IndexTag, Separator: ";", CaseSensitive: true, Sortable: true},
				{Name: "n", Type: partmap.IndexNumeric, Sortable: true}}}},
		{line: "ft.create idx STOPWORDS 2 foo bar PREFIX 0 SCHEMA a TAG b TEXT",
			want: partmap.IndexDefinition{Name: "idx", Stopwords: []string{"foo", "bar"}, Fields: []partmap.IndexField{{Name: "a", Type: partmap.IndexTag}, text("b")}}},
		// What follows a field's options names the next field, as in Redis.
		{line: "ft.create idx SCHEMA a TEXT SORTABLE NOSTEM", err: "Field `NOSTEM` does not have a type"},

		{line: "ft.create idx ON HASH", err: "No schema found"},
		{line: "ft.create idx SCHEMA", err: "Fields arguments are missing"},
		{line: "ft.create idx BOGUS SCHEMA a TEXT", err: "Unknown argument `BOGUS`"},
		{line: "ft.create idx ON", err: "Bad arguments for ON: Expected an argument, but none provided"},
		{line: "ft.create idx ON LIST SCHEMA a TEXT", err: "Invalid rule type: LIST"},
		{line: "ft.create idx PREFIX x SCHEMA a TEXT", err: "Bad arguments for PREFIX: Could not convert argument to expected type"},
		{line: "ft.create idx PREFIX -1 SCHEMA a TEXT", err: "Bad arguments for PREFIX: Value is outside acceptable bounds"},
		{line: "ft.create idx STOPWORDS 9 a", err: "Bad arguments for STOPWORDS: Expected an argument, but none provided"},
		{line: "ft.create idx SCHEMA a TEXT a TAG", err: "Duplicate field in schema - a"},
		{line: "ft.create idx SCHEMA a", err: "Field `a` does not have a type"},
		{line: "ft.create idx SCHEMA a TXT", err: "Invalid field type for field `a`"},
		{line: "ft.create idx SCHEMA a TAG SEPARATOR", err: "SEPARATOR requires an argument"},
		{line: "ft.create idx SCHEMA a TAG SEPARATOR ab", err: "Tag separator must be a single character. Got `ab`"},

		{line: "ft.create idx ON JSON SCHEMA a TEXT", err: "Unsupported argument `JSON`: "},
		{line: "ft.create idx PREFIX 1 user: SCHEMA a TEXT", err: "Unsupported argument `PREFIX user:`: an index holds every profile"},
		{line: "ft.create idx NOHL SCHEMA a TEXT", err: "Unsupported argument `NOHL`: "},
		{line: "ft.create idx SCHEMA a AS b TEXT", err: "Unsupported argument `AS`: "},
		{line: "ft.create idx SCHEMA a GEO", err: "Unsupported argument `GEO`: "},
		{line: "ft.create idx SCHEMA a TEXT WEIGHT 2", err: "Unsupported argument `WEIGHT`: partmap's TEXT fields take NOSTEM and SORTABLE"},
		{line: "ft.create idx SCHEMA a NUMERIC SORTABLE UNF", err: "Unsupported argument `UNF`: "},
		{line: "ft.create idx SCHEMA a TAG NOINDEX", err: "Unsupported argument `NOINDEX`: "},
	} {
		got, err := parseFTCreate(splitLine(tc.line))
		switch {
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.line, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.line, err)
		case tc.err == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%s:\n got %+v\nwant %+v", tc.line, got, tc.want)
		}
	}
}

// FT.SEARCH's options become SearchOptions, or Redis's refusal.
func TestParseFTSearch(t *testing.T) {
	for _, tc := range []struct {
		line string
		want partmap.SearchOptions
		err  string
	}{
		{line: "ft.search idx al*", want: partmap.SearchOptions{Query: "al*"}},
		{line: "ft.search idx q nocontent sortby n desc limit 10 5 dialect 2",
			want: partmap.SearchOptions{Query: "q", NoContent: true, SortBy: "n", Descending: true, Offset: 10, Limit: 5}},
		{line: "ft.search idx q LIMIT 0 0 SORTBY n ASC", want: partmap.SearchOptions{Query: "q", Limit: -1, SortBy: "n"}},
		// RETURN: each field once, but the key and "", and RETURN 0 is NOCONTENT.
		{line: "ft.search idx q RETURN 4 b a b emailAddress", want: partmap.SearchOptions{Query: "q", Return: []string{"b", "a"}}},
		{line: "ft.search idx q RETURN 0", want: partmap.SearchOptions{Query: "q", NoContent: true}},
		{line: "ft.search idx q RETURN 1 a NOCONTENT", want: partmap.SearchOptions{Query: "q", NoContent: true}},
		{line: "ft.search idx q LIMIT 1.0 2", want: partmap.SearchOptions{Query: "q", Offset: 1, Limit: 2}},

		{line: "ft.search idx q BOGUS", err: "Unknown argument `BOGUS` at position 1 for <main>"},
		{line: "ft.search idx q LIMIT 0 5 BOGUS x", err: "Unknown argument `BOGUS` at position 4 for <main>"},
		{line: "ft.search idx q LIMIT 0", err: "LIMIT requires two arguments"},
		{line: "ft.search idx q LIMIT 0 x", err: "LIMIT needs two numeric arguments"},
		{line: "ft.search idx q LIMIT -1 5", err: "LIMIT needs two numeric arguments"},
		{line: "ft.search idx q LIMIT 3 0", err: "The `offset` of the LIMIT must be 0 when `num` is 0"},
		{line: "ft.search idx q LIMIT 0 10001", err: "LIMIT exceeds maximum of 10000"},
		{line: "ft.search idx q LIMIT 1000001 1", err: "OFFSET exceeds maximum of 1000000"},
		{line: "ft.search idx q SORTBY", err: "Bad SORTBY arguments"},
		{line: "ft.search idx q SORTBY a SORTBY b", err: "Multiple SORTBY steps are not allowed"},
		{line: "ft.search idx q SORTBY a MAX 5", err: "SORTBY MAX is not supported by FT.SEARCH"},
		{line: "ft.search idx q RETURN", err: "Bad arguments for RETURN: Expected an argument, but none provided"},
		{line: "ft.search idx q RETURN 3 a", err: "Bad arguments for RETURN: Expected an argument, but none provided"},
		{line: "ft.search idx q RETURN x", err: "Bad arguments for RETURN: Could not convert argument to expected type"},
		{line: "ft.search idx q RETURN 3 a AS b", err: "Unsupported argument `AS`: "},
		{line: "ft.search idx q DIALECT", err: "Need an argument for DIALECT"},
		{line: "ft.search idx q DIALECT 3", err: "Unsupported argument `DIALECT 3`: "},
		{line: "ft.search idx q WITHSCORES", err: "Unsupported argument `WITHSCORES`: partmap's FT.SEARCH takes"},
	} {
		got, err := parseFTSearch(splitLine(tc.line))
		switch {
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.line, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.line, err)
		case tc.err == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%s:\n got %+v\nwant %+v", tc.line, got, tc.want)
		}
	}
}

// A store's error becomes the FT commands' reply: the command's text for
// an unknown index, Redis's for an index that exists, a refusal's message
// bare, and the rest as every command answers it (an index still being
// built is LOADING, which go-redis retries).
func TestFTError(t *testing.T) {
	for _, tc := range []struct {
		err      error
		notFound string
		want     string
	}{
		{partmap.Errorf(partmap.ENOTFOUND, "Unknown Index name"), "No such index idx", "No such index idx"},
		{partmap.Errorf(partmap.ENOTFOUND, "no profile"), "", "ERR no profile"},
		{partmap.Errorf(partmap.EEXISTS, "Index already exists"), "", "Index already exists"},
		{partmap.Errorf(partmap.EINVALID, "Syntax error at offset 3 near x"), "", "Syntax error at offset 3 near x"},
		{partmap.Errorf(partmap.EUNAVAILABLE, "index \"idx\" is still being built"), "", "LOADING index \"idx\" is still being built"},
		{partmap.Errorf(partmap.ELOCKCONFLICT, "locked"), "", "TRYAGAIN locked"},
	} {
		if got := ftError(tc.err, tc.notFound); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
