package partmap

import (
	"encoding/json"
	"testing"
)

// The fast path must accept exactly the flat objects of strings and nulls
// that encoding/json accepts, so that taking it never changes an answer.
func checkFlatObjectSyntax(t *testing.T, data []byte) {
	var flat map[string]*string
	want := json.Valid(data) && json.Unmarshal(data, &flat) == nil && flat != nil
	if got := flatObjectSyntax(data); got != want {
		t.Fatalf("flatObjectSyntax(%q) = %v; encoding/json says %v", data, got, want)
	}
}

func TestFlatObjectSyntax(t *testing.T) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":"b"}`, "\t{\"a\" : \"b\" ,\r\n\"c\":null}\n", `{"a":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t"}`,
		`{"a":"b","a":"c"}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"\u0041":"x"}`,
		``, ` `, `{`, `}`, `[]`, `null`, `"a"`, `{"a"}`, `{"a":}`, `{"a":"b",}`, `{,}`, `{"a":"b"}x`, `{"a":"b"}{}`,
		`{"a":1}`, `{"a":true}`, `{"a":[]}`, `{"a":{}}`, `{"a":nul}`, `{"a":nullx}`, `{"a":"b" "c":"d"}`,
		"{\"a\":\"b\x00\"}", "{\"a\":\"b\x1f\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\`, `{"a":"b`, `{a:"b"}`,
		`{'a':"b"}`, "\xef\xbb\xbf{}", "{\"a\":\"b\"}\x00", "{\u00a0}",
	} {
		checkFlatObjectSyntax(t, []byte(s))
	}
}

func FuzzFlatObjectSyntax(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b","c":null}`, `{"a":"\u00e9"}`, `{"a":1}`, `{"a":"b",}`, `{"a":"\q"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkFlatObjectSyntax)
}
