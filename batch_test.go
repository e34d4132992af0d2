package partmap_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// wantSays fails unless err has code and a message that says says.
func wantSays(t *testing.T, err error, code partmap.Code, says string) {
	t.Helper()
	if partmap.ErrorCode(err) != code || !strings.Contains(partmap.ErrorMessage(err), says) {
		t.Fatalf("got %v, want %s saying %s", err, code, says)
	}
}

// A listRefusal is a list of emails or fields that a batch read refuses
// with code, in a message that says says.
type listRefusal struct {
	name string
	list []string
	code partmap.Code
	says string
}

func TestParseStringListsJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string][]string
		code partmap.Code
		says string
	}{
		{"OK", `{"emails":["a@b"," C@D "],"fields":["x","a,b"]}`, map[string][]string{"emails": {"a@b", " C@D "}, "fields": {"x", "a,b"}}, "", ""},
		{"OKSpaced", " { \"emails\" : [ \"a@b\" , \"c\\u00e9\" ] , \"fields\" : [ ] } ", map[string][]string{"emails": {"a@b", "cé"}, "fields": {}}, "", ""},
		{"OKEmpty", `{}`, map[string][]string{}, "", ""},
		{"OKSurrogatePair", `{"fields":["\ud83d\ude42"]}`, map[string][]string{"fields": {"🙂"}}, "", ""},
		{"ErrNotObject", `["a@b"]`, nil, partmap.EMALFORMEDJSON, "JSON object"},
		{"ErrSyntax", `{"emails":["a@b"}`, nil, partmap.EMALFORMEDJSON, "malformed JSON"},
		{"ErrEmptyBody", ``, nil, partmap.EMALFORMEDJSON, "empty"},
		{"ErrRepeatedMember", `{"emails":["a"],"emails":["b"]}`, nil, partmap.EMALFORMEDJSON, `"emails" appears more than once`},
		{"ErrNotArray", `{"emails":"a@b"}`, nil, partmap.EMALFORMEDJSON, "emails is a string"},
		{"ErrNull", `{"fields":null}`, nil, partmap.EMALFORMEDJSON, "fields is null"},
		{"ErrItemNotString", `{"emails":["a@b",7]}`, nil, partmap.EMALFORMEDJSON, "emails[1] is a number"},
		{"ErrNested", `{"emails":[["a@b"]]}`, nil, partmap.EMALFORMEDJSON, "emails[0] is an array"},
		{"ErrLoneSurrogate", `{"fields":["ok","\ud800x"]}`, nil, partmap.EINVALIDUTF8, `fields[1] "\\ud800x" contains the escaped lone surrogate \ud800`},
		{"ErrRawBytes", "{\"emails\":[\"a\xffb\"]}", nil, partmap.EINVALIDUTF8, `emails[0] "a\xffb" contains bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := partmap.ParseStringListsJSON([]byte(tc.in))
			if tc.code != "" {
				wantSays(t, err, tc.code, tc.says)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || !slices.Equal(g, v) || g == nil {
					t.Fatalf("%s: got %q, want %q", k, g, v)
				}
			}
		})
	}
}

func TestCanonicalEmails(t *testing.T) {
	got, err := partmap.CanonicalEmails([]string{" A@B ", "a@b", "x@Y"})
	if want := []string{"a@b", "a@b", "x@y"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	long := strings.Repeat("x", 1000)
	for _, tc := range []listRefusal{
		{"ErrNone", nil, partmap.EINVALID, "at least one email"},
		{"ErrTooMany", make([]string, partmap.MaxBatchEmails+1), partmap.EINVALID, "1001 emails in one batch read; the limit is 1000"},
		{"ErrBlank", []string{"a@b", "  "}, partmap.EINVALIDEMAIL, `emails[1] "  ": email address is empty`},
		{"ErrLongShownShort", []string{long}, partmap.ETOOLARGE, `emails[0] "` + long[:64] + `"…: email address is 1000 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := partmap.CanonicalEmails(tc.list)
			wantSays(t, err, tc.code, tc.says)
			if got != nil {
				t.Fatalf("got %q with the error", got)
			}
		})
	}
	var e *partmap.Error
	if _, err := partmap.CanonicalEmails([]string{long}); !errors.As(err, &e) || e.Limit != "email" || e.LimitBytes != partmap.MaxEmailBytes {
		t.Fatalf("a long email lost its limit: %#v", e)
	}
}

func TestCheckBatchFields(t *testing.T) {
	if err := partmap.CheckBatchFields([]string{"a", "a,b", "name.first", "é"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []listRefusal{
		{"ErrNil", nil, partmap.EINVALID, "fields is empty"},
		{"ErrEmpty", []string{}, partmap.EINVALID, "fields is empty"},
		{"ErrEmptyName", []string{"a", ""}, partmap.EINVALID, "fields[1] is an empty field name"},
		{"ErrRepeated", []string{"a", "b", "b"}, partmap.EINVALID, `fields[2] "b" is named twice (first as fields[1])`},
		{"ErrNotUTF8", []string{"\xc3"}, partmap.EINVALIDUTF8, `fields[0] "\xc3" is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantSays(t, partmap.CheckBatchFields(tc.list), tc.code, tc.says)
		})
	}
}
