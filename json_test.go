package partmap_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"strings"
	"testing"
	"testing/quick"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// strp returns a pointer to s, for Patch values.
func strp(s string) *string { return &s }

// A jsonFault is a text a strict JSON parser refuses with code, naming
// field ("" for none).
type jsonFault struct {
	name, in string
	code     partmap.Code
	field    string
}

// wantFault fails unless err is tt's code naming tt's field, with a
// message and field that are valid UTF-8 (they are echoed to clients).
func wantFault(t *testing.T, tt jsonFault, err error) {
	t.Helper()
	e := wantCode(t, err, tt.code)
	if tt.field != "" && e.Field != tt.field {
		t.Fatalf("Field = %q, want %q (error: %v)", e.Field, tt.field, err)
	}
	if e.Message == "" || !utf8.ValidString(e.Message) || !utf8.ValidString(e.Field) {
		t.Fatalf("error message %q or field %q is empty or not valid UTF-8", e.Message, e.Field)
	}
}

// strictFaults are refused by ParseProfileJSON and, as strictly, by
// ParsePatchJSON.
var strictFaults = []jsonFault{
	// Values that are not strings name their field.
	{"ErrNumber", `{"age":42}`, partmap.ENONSTRING, "age"},
	{"ErrNegativeNumber", `{"age":-1.5e3}`, partmap.ENONSTRING, "age"},
	{"ErrTrue", `{"vip":true}`, partmap.ENONSTRING, "vip"},
	{"ErrFalse", `{"vip":false}`, partmap.ENONSTRING, "vip"},
	{"ErrObject", `{"name":{"first":"A"}}`, partmap.ENONSTRING, "name"},
	{"ErrEmptyObjectValue", `{"name":{}}`, partmap.ENONSTRING, "name"},
	{"ErrArray", `{"tags":["a"]}`, partmap.ENONSTRING, "tags"},
	{"ErrEmptyArrayValue", `{"tags":[]}`, partmap.ENONSTRING, "tags"},
	{"ErrNonStringAfterGoodOnes", `{"a":"x","b":"y","c":7}`, partmap.ENONSTRING, "c"},
	{"ErrNonStringEscapedName", `{"f\u00fcr":1}`, partmap.ENONSTRING, "f\u00fcr"},

	// Raw invalid UTF-8 in a value names the field.
	{"ErrValueByteFF", "{\"fullName\":\"a\xffb\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueByteFE", "{\"fullName\":\"\xfe\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueLoneContinuation", "{\"fullName\":\"\x80\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueOverlongSlash", "{\"fullName\":\"\xc0\xaf\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueOverlongNUL", "{\"fullName\":\"\xc0\x80\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueOverlongThreeByte", "{\"fullName\":\"\xe0\x80\xaf\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueEncodedHighSurrogate", "{\"fullName\":\"\xed\xa0\x80\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueEncodedLowSurrogate", "{\"fullName\":\"\xed\xbf\xbf\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueEncodedPairCESU8", "{\"fullName\":\"\xed\xa0\xbd\xed\xb8\x80\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueAboveMax", "{\"fullName\":\"\xf4\x90\x80\x80\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueFiveByteForm", "{\"fullName\":\"\xf8\x88\x80\x80\x80\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueTruncated", "{\"fullName\":\"\xe4\xb8\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueTruncatedBeforeASCII", "{\"fullName\":\"\xe4\xb8x\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueTruncatedFourByte", "{\"fullName\":\"\xf0\x9f\x98\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueInvalidWithEscapes", "{\"fullName\":\"\\n\xff\\u00e9\"}", partmap.EINVALIDUTF8, "fullName"},
	{"ErrValueInvalidAfterGoodField", "{\"a\":\"ok\",\"companyName\":\"\xff\"}", partmap.EINVALIDUTF8, "companyName"},

	// Escaped surrogates that do not form a pair.
	{"ErrLoneHigh", `{"fullName":"\ud800"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrLoneHighInText", `{"fullName":"ab\ud83dcd"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrLoneHighAtEnd", `{"fullName":"abc\ud83d"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrLoneLow", `{"fullName":"\udc00"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrLoneLowUpper", `{"fullName":"\uDFFF"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenNonLow", `{"fullName":"\ud800\u0041"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenHigh", `{"fullName":"\ud800\ud800"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrLowThenHigh", `{"fullName":"\ude00\ud83d"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrLowThenLow", `{"fullName":"\udc00\udc00"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrLowThenLowUpper", `{"fullName":"\uDE00\uDFFF"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenAboveLowRange", `{"fullName":"\ud83d\ue000"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenFFFF", `{"fullName":"\udbff\uffff"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenBelowLowRange", `{"fullName":"\ud83d\udbff"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenShortEscape", `{"fullName":"\ud83d\n"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenEscapedBackslash", `{"fullName":"\ud83d\\ude00"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrHighThenRawLowText", `{"fullName":"\ud83dude00"}`, partmap.EINVALIDUTF8, "fullName"},
	{"ErrPairThenLoneLow", `{"fullName":"\ud83d\ude00\ude00"}`, partmap.EINVALIDUTF8, "fullName"},

	// Duplicate names, also when spelled differently.
	{"ErrDuplicate", `{"a":"1","a":"2"}`, partmap.EMALFORMEDJSON, "a"},
	{"ErrDuplicateSameValue", `{"fullName":"x","b":"y","fullName":"x"}`, partmap.EMALFORMEDJSON, "fullName"},
	{"ErrDuplicateEscaped", `{"a":"1","\u0061":"2"}`, partmap.EMALFORMEDJSON, "a"},

	// Not a JSON object.
	{"ErrEmptyBody", ``, partmap.EMALFORMEDJSON, ""},
	{"ErrBlankBody", " \t\r\n", partmap.EMALFORMEDJSON, ""},
	{"ErrTopLevelArray", `[]`, partmap.EMALFORMEDJSON, ""},
	{"ErrTopLevelArrayOfObject", `[{"a":"b"}]`, partmap.EMALFORMEDJSON, ""},
	{"ErrTopLevelString", `"alice@example.com"`, partmap.EMALFORMEDJSON, ""},
	{"ErrTopLevelNumber", `12`, partmap.EMALFORMEDJSON, ""},
	{"ErrTopLevelNull", `null`, partmap.EMALFORMEDJSON, ""},
	{"ErrTopLevelTrue", `true`, partmap.EMALFORMEDJSON, ""},
	{"ErrUnclosed", `{"a":"b"`, partmap.EMALFORMEDJSON, ""},
	{"ErrUnclosedString", `{"a":"b}`, partmap.EMALFORMEDJSON, ""},
	{"ErrOnlyOpen", `{`, partmap.EMALFORMEDJSON, ""},
	{"ErrTrailingComma", `{"a":"b",}`, partmap.EMALFORMEDJSON, ""},
	{"ErrMissingColon", `{"a" "b"}`, partmap.EMALFORMEDJSON, ""},
	{"ErrMissingComma", `{"a":"b" "c":"d"}`, partmap.EMALFORMEDJSON, ""},
	{"ErrMissingValue", `{"a":}`, partmap.EMALFORMEDJSON, ""},
	{"ErrSingleQuotes", `{'a':'b'}`, partmap.EMALFORMEDJSON, ""},
	{"ErrBareName", `{a:"b"}`, partmap.EMALFORMEDJSON, ""},
	{"ErrTrailingGarbage", `{"a":"b"} x`, partmap.EMALFORMEDJSON, ""},
	{"ErrTwoObjects", `{"a":"b"}{}`, partmap.EMALFORMEDJSON, ""},
	{"ErrRawControlInString", "{\"a\":\"x\ty\"}", partmap.EMALFORMEDJSON, ""},
	{"ErrRawNewlineInString", "{\"a\":\"x\ny\"}", partmap.EMALFORMEDJSON, ""},
	{"ErrBadEscape", `{"a":"\x41"}`, partmap.EMALFORMEDJSON, ""},
	{"ErrShortUnicodeEscape", `{"a":"\u12"}`, partmap.EMALFORMEDJSON, ""},
	{"ErrNonHexUnicodeEscape", `{"a":"\u12g4"}`, partmap.EMALFORMEDJSON, ""},
	{"ErrComment", `{"a":"b" /* c */}`, partmap.EMALFORMEDJSON, ""},
	{"ErrNumberName", `{1:"b"}`, partmap.EMALFORMEDJSON, ""},
}

// validProfiles are read by ParseProfileJSON as want, and by
// ParsePatchJSON as the patch that sets each field of want.
var validProfiles = []struct {
	name string
	in   string
	want partmap.Profile
}{
	{"OKEmptyObject", `{}`, partmap.Profile{}},
	{"OKEmptyObjectSpaced", " \t\r\n{ \t\r\n} \t\r\n", partmap.Profile{}},
	{"OKDocumented", `{"emailAddress":"alice@example.com","fullName":"Alice","companyName":"Acme","customerTier":"gold"}`,
		partmap.Profile{"emailAddress": "alice@example.com", "fullName": "Alice", "companyName": "Acme", "customerTier": "gold"}},
	{"OKWhitespaceAroundTokens", " \n{ \t\"a\" \r\n: \t\"b\" \n, \"c\"\t:\"d\"\r\n}\n ", partmap.Profile{"a": "b", "c": "d"}},
	{"OKEmptyValue", `{"fullName":""}`, partmap.Profile{"fullName": ""}},
	{"OKShortEscapes", `{"v":"q\" b\\ s\/ \b \f \n \r \t"}`, partmap.Profile{"v": "q\" b\\ s/ \b \f \n \r \t"}},
	{"OKOnlyEscapes", `{"v":"\"\\\/\b\f\n\r\t"}`, partmap.Profile{"v": "\"\\/\b\f\n\r\t"}},
	{"OKUnicodeEscape", `{"v":"caf\u00e9"}`, partmap.Profile{"v": "caf\u00e9"}},
	{"OKUnicodeEscapeUpper", `{"v":"caf\u00E9 \u20AC"}`, partmap.Profile{"v": "caf\u00e9 \u20ac"}},
	{"OKEscapedNUL", `{"v":"a\u0000b"}`, partmap.Profile{"v": "a\x00b"}},
	{"OKEscapedControls", `{"v":"\u0001\u001f\u007f"}`, partmap.Profile{"v": "\x01\x1f\x7f"}},
	{"OKSurrogatePair", `{"v":"\ud83d\ude00"}`, partmap.Profile{"v": "\U0001F600"}},
	{"OKSurrogatePairUpper", `{"v":"\uD83D\uDE00"}`, partmap.Profile{"v": "\U0001F600"}},
	{"OKSurrogatePairInText", `{"v":"a\ud83d\ude00b\ud83d\ude01"}`, partmap.Profile{"v": "a\U0001F600b\U0001F601"}},
	{"OKSurrogatePairBounds", `{"v":"\ud800\udc00\udbff\udfff"}`, partmap.Profile{"v": "\U00010000\U0010FFFF"}},
	{"OKEscapeNextToSurrogateRange", `{"v":"\ud7ff\ue000\uffff\ufffd"}`, partmap.Profile{"v": "\ud7ff\ue000\uffff\ufffd"}},
	{"OKRawMultibyte", `{"名前":"日本語 é 😀 \u2028"}`, partmap.Profile{"名前": "日本語 é 😀 \u2028"}},
	{"OKRawAndEscapedMixed", `{"v":"é\u00e9😀\ud83d\ude00"}`, partmap.Profile{"v": "éé😀😀"}},
	{"OKRawBOMInValue", "{\"v\":\"\uFEFFx\"}", partmap.Profile{"v": "\uFEFFx"}},
	{"OKNFDUnchanged", "{\"v\":\"e\u0301\"}", partmap.Profile{"v": "e\u0301"}},
	{"OKDottedNamesLiteral", `{"name.first":"Alice","a.b.c":"x","a":"y"}`, partmap.Profile{"name.first": "Alice", "a.b.c": "x", "a": "y"}},
	{"OKEscapedName", `{"\u0066ullName":"x","a\"b":"y","c\\d":"z"}`, partmap.Profile{"fullName": "x", "a\"b": "y", "c\\d": "z"}},
	{"OKCaseSensitiveNames", `{"a":"1","A":"2"}`, partmap.Profile{"a": "1", "A": "2"}},
	{"OKBackslashBeforeQuote", `{"v":"\\"}`, partmap.Profile{"v": "\\"}},
	{"OKManyBackslashes", `{"v":"\\\\\"\\"}`, partmap.Profile{"v": "\\\\\"\\"}},
	{"OKBracesInString", `{"v":"}{,:\"[]"}`, partmap.Profile{"v": "}{,:\"[]"}},
	{"OKLiteralNullText", `{"v":"null"}`, partmap.Profile{"v": "null"}},
}

func TestParseProfileJSON(t *testing.T) {
	for _, tt := range validProfiles {
		t.Run(tt.name, func(t *testing.T) {
			got, err := partmap.ParseProfileJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseProfileJSON(%q) error: %v", tt.in, err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("ParseProfileJSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// The strict decoder agrees with encoding/json on valid input.
			var std map[string]string
			if err := json.Unmarshal([]byte(tt.in), &std); err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if !maps.Equal(map[string]string(got), std) {
				t.Fatalf("ParseProfileJSON(%q) = %q, encoding/json says %q", tt.in, got, std)
			}
		})
	}

	// null deletes a field in a patch; in a profile it is not a string.
	errs := append([]jsonFault{{"ErrNull", `{"fullName":null}`, partmap.ENONSTRING, "fullName"}}, strictFaults...)
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			got, err := partmap.ParseProfileJSON([]byte(tt.in))
			wantFault(t, tt, err)
			if got != nil {
				t.Fatalf("ParseProfileJSON(%q) = %q with an error, want nil", tt.in, got)
			}
		})
	}

	// The same byte faults in a field name: EINVALIDUTF8, with a Field that
	// is itself valid UTF-8 (it is echoed in problem documents).
	names := []struct {
		name, rawName string
	}{
		{"ErrNameByteFF", "na\xffme"},
		{"ErrNameOverlong", "\xc0\xaf"},
		{"ErrNameEncodedSurrogate", "x\xed\xa0\x80"},
		{"ErrNameAboveMax", "\xf4\x90\x80\x80"},
		{"ErrNameTruncated", "ab\xe4\xb8"},
		{"ErrNameLoneHigh", `ab\ud800`},
		{"ErrNameLoneLow", `\udc00`},
		{"ErrNameHighThenNonLow", `\ud800\u0041`},
	}
	for _, tt := range names {
		t.Run(tt.name, func(t *testing.T) {
			for _, in := range []string{
				`{"` + tt.rawName + `":"v"}`,
				`{"ok":"v","` + tt.rawName + `":"v"}`,
				`{"` + tt.rawName + `":1}`, // the name is read before the value
			} {
				got, err := partmap.ParseProfileJSON([]byte(in))
				e := wantCode(t, err, partmap.EINVALIDUTF8)
				if got != nil {
					t.Fatalf("ParseProfileJSON(%q) = %q with an error", in, got)
				}
				if !utf8.ValidString(e.Field) || !utf8.ValidString(e.Message) {
					t.Fatalf("ParseProfileJSON(%q): Field %q or Message %q is not valid UTF-8", in, e.Field, e.Message)
				}
				// The whole name is blamed, never a prefix that is another name.
				if want := strings.ToValidUTF8(tt.rawName, "\uFFFD"); e.Field != want {
					t.Fatalf("ParseProfileJSON(%q): Field %q, want %q", in, e.Field, want)
				}
			}
		})
	}

	// Never a silent U+FFFD: random invalid bytes are always refused.
	t.Run("ErrRandomInvalidUTF8", func(t *testing.T) {
		rng := rand.New(rand.NewSource(6))
		tried := 0
		for tried < 3000 {
			b := make([]byte, 1+rng.Intn(12))
			for i := range b {
				b[i] = byte(0x20 + rng.Intn(0xe0))
				if b[i] == '"' || b[i] == '\\' {
					b[i] = 'x'
				}
			}
			if utf8.Valid(b) {
				continue
			}
			tried++
			in := `{"f":"` + string(b) + `"}`
			_, err := partmap.ParseProfileJSON([]byte(in))
			e := wantCode(t, err, partmap.EINVALIDUTF8)
			if e.Field != "f" {
				t.Fatalf("ParseProfileJSON(%q): Field = %q, want f", in, e.Field)
			}
		}
	})
}

func TestParsePatchJSON(t *testing.T) {
	type patchCase struct {
		name, in string
		want     partmap.Patch
	}
	ok := []patchCase{
		{"OKSet", `{"fullName":"Alice"}`, partmap.Patch{"fullName": strp("Alice")}},
		{"OKNullDeletes", `{"companyName":null}`, partmap.Patch{"companyName": nil}},
		{"OKMixed", ` { "a" : null , "b" : "x\u00e9" , "c":null,"d.e":"\ud83d\ude00" } `,
			partmap.Patch{"a": nil, "b": strp("x\u00e9"), "c": nil, "d.e": strp("\U0001F600")}},
		{"OKNullText", `{"a":"null"}`, partmap.Patch{"a": strp("null")}},
		{"OKEscapes", `{"a":"\"\\\/\b\f\n\r\t"}`, partmap.Patch{"a": strp("\"\\/\b\f\n\r\t")}},
	}
	for _, p := range validProfiles {
		want := partmap.Patch{}
		for name, v := range p.want {
			want[name] = strp(v)
		}
		ok = append(ok, patchCase{p.name, p.in, want})
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			got, err := partmap.ParsePatchJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParsePatchJSON(%q) error: %v", tt.in, err)
			}
			if !patchEqual(got, tt.want) {
				t.Fatalf("ParsePatchJSON(%q) = %s, want %s", tt.in, showPatch(got), showPatch(tt.want))
			}
		})
	}

	// Every fault of a profile (strictFaults), and those that involve null.
	errs := append([]jsonFault{
		{"ErrNumberAfterNull", `{"a":null,"age":1}`, partmap.ENONSTRING, "age"},
		{"ErrObjectOfNull", `{"name":{"first":null}}`, partmap.ENONSTRING, "name"},
		{"ErrArrayOfNull", `{"tags":[null]}`, partmap.ENONSTRING, "tags"},
		{"ErrValueOnlyByteFF", "{\"fullName\":\"\xff\"}", partmap.EINVALIDUTF8, "fullName"},
		{"ErrNameInvalidUTF8WithNull", "{\"\xff\":null}", partmap.EINVALIDUTF8, ""},
		{"ErrDuplicateNullFirst", `{"a":null,"a":"x"}`, partmap.EMALFORMEDJSON, "a"},
		{"ErrDuplicateNulls", `{"a":null,"a":null}`, partmap.EMALFORMEDJSON, "a"},
		{"ErrTopLevelArrayOfNull", `[null]`, partmap.EMALFORMEDJSON, ""},
		{"ErrTopLevelShortString", `"x"`, partmap.EMALFORMEDJSON, ""},
		{"ErrMalformedNull", `{"a":nul}`, partmap.EMALFORMEDJSON, ""},
		{"ErrTrailingCommaAfterNull", `{"a":null,}`, partmap.EMALFORMEDJSON, ""},
	}, strictFaults...)
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			got, err := partmap.ParsePatchJSON([]byte(tt.in))
			wantFault(t, tt, err)
			if got != nil {
				t.Fatalf("ParsePatchJSON(%q) = %s with an error, want nil", tt.in, showPatch(got))
			}
		})
	}
}

func patchEqual(a, b partmap.Patch) bool {
	return maps.EqualFunc(a, b, func(x, y *string) bool {
		return (x == nil) == (y == nil) && (x == nil || *x == *y)
	})
}

func showPatch(p partmap.Patch) string {
	var b strings.Builder
	for k, v := range p {
		if v == nil {
			fmt.Fprintf(&b, "%q:null ", k)
		} else {
			fmt.Fprintf(&b, "%q:%q ", k, *v)
		}
	}
	return "{" + b.String() + "}"
}

// tricky holds strings that JSON encoders commonly get wrong.
var tricky = func() []string {
	var controls strings.Builder
	for c := 0; c < 0x20; c++ {
		controls.WriteByte(byte(c))
	}
	return []string{
		"",
		controls.String(),
		"\x00",
		"\x7f",
		`"quoted"`,
		`back\slash\`,
		`\"\\\u0041`,
		"<script>&amp;</script>",
		"line\u2028para\u2029end",
		"\U0001F600\U0001F469\u200d\U0001F4BB",
		"\uFEFFbom first",
		"e\u0301 \u00e9",     // NFD and NFC stay distinct
		"\u1100\u1161\u11a8", // conjoining jamo, not composed
		"\uFFFD already replaced",
		"\uFFFE\uFFFF\U0010FFFF",
		"\ud7ff\ue000",
		strings.Repeat("x", 5000),
	}
}()

func TestProfileMarshalJSON(t *testing.T) {
	t.Run("OKRoundTrip", func(t *testing.T) {
		for i, s := range tricky {
			p := partmap.Profile{partmap.FieldEmail: "a@b.c", "value": s, "k" + s: "name test"}
			data, err := p.MarshalJSON()
			if err != nil {
				t.Fatalf("case %d: MarshalJSON error: %v", i, err)
			}
			got, err := partmap.ParseProfileJSON(data)
			if err != nil {
				t.Fatalf("case %d: ParseProfileJSON(%q) error: %v", i, data, err)
			}
			if !maps.Equal(got, p) {
				t.Fatalf("case %d: round trip = %q, want %q", i, got, p)
			}
			// The output is JSON that encoding/json reads the same way.
			var std map[string]string
			if err := json.Unmarshal(data, &std); err != nil {
				t.Fatalf("case %d: encoding/json cannot read %q: %v", i, data, err)
			}
			if !maps.Equal(std, map[string]string(p)) {
				t.Fatalf("case %d: encoding/json read %q, want %q", i, std, p)
			}
		}
	})

	t.Run("OKAllTrickyInOneProfile", func(t *testing.T) {
		p := partmap.Profile{}
		for i, s := range tricky {
			p[fmt.Sprintf("f%02d", i)] = s
		}
		data, err := json.Marshal(p) // through the json.Marshaler interface
		if err != nil {
			t.Fatal(err)
		}
		var got partmap.Profile
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, p) {
			t.Fatalf("round trip = %q, want %q", got, p)
		}
	})

	t.Run("OKNoHTMLEscaping", func(t *testing.T) {
		data, err := partmap.Profile{"v": "<a href='x'>&</a>"}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"v":"<a href='x'>&</a>"}`; string(data) != want {
			t.Fatalf("MarshalJSON = %s, want %s", data, want)
		}
	})

	t.Run("OKExactOutput", func(t *testing.T) {
		p := partmap.Profile{
			"zeta":                   "z",
			"customerTier":           "gold",
			"Alpha":                  "A",
			partmap.FieldEmail:       "alice@example.com",
			"name.first":             "Alice",
			partmap.FieldCompanyName: "Acme & Co",
			partmap.FieldFullName:    "Alice \"Al\" Smith",
			"ctl":                    "\x00\x1f\t\n\r\\\u2028é😀",
		}
		data, err := p.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want := `{"emailAddress":"alice@example.com","fullName":"Alice \"Al\" Smith","companyName":"Acme & Co","customerTier":"gold",` +
			`"Alpha":"A","ctl":"\u0000\u001f\t\n\r\\` + "\u2028é😀" + `","name.first":"Alice","zeta":"z"}`
		if string(data) != want {
			t.Fatalf("MarshalJSON =\n%s\nwant\n%s", data, want)
		}
	})

	t.Run("OKEmpty", func(t *testing.T) {
		for _, p := range []partmap.Profile{nil, {}} {
			data, err := p.MarshalJSON()
			if err != nil || string(data) != "{}" {
				t.Fatalf("MarshalJSON(%#v) = %s, %v; want {}", p, data, err)
			}
		}
	})

	t.Run("OKStable", func(t *testing.T) {
		p := partmap.Profile{}
		for i := 0; i < 50; i++ {
			p[fmt.Sprintf("k%d", i)] = fmt.Sprint(i)
		}
		first, _ := p.MarshalJSON()
		for i := 0; i < 20; i++ {
			again, _ := p.MarshalJSON()
			if !bytes.Equal(first, again) {
				t.Fatalf("MarshalJSON is not stable:\n%s\n%s", first, again)
			}
		}
	})

	errs := []struct {
		name      string
		in        partmap.Profile
		wantField string
	}{
		{"ErrValueByteFF", partmap.Profile{"fullName": "a\xffb"}, "fullName"},
		{"ErrValueSurrogate", partmap.Profile{"fullName": "\xed\xa0\x80"}, "fullName"},
		{"ErrValueOverlong", partmap.Profile{"emailAddress": "a@b.c", "fullName": "\xc0\xaf"}, "fullName"},
		{"ErrValueTruncated", partmap.Profile{"x": "\xe4\xb8"}, "x"},
		{"ErrValueAboveMax", partmap.Profile{"x": "\xf4\x90\x80\x80"}, "x"},
		{"ErrName", partmap.Profile{"n\xffme": "v"}, ""},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			data, err := tt.in.MarshalJSON()
			e := wantCode(t, err, partmap.EINVALIDUTF8)
			if data != nil {
				t.Fatalf("MarshalJSON = %q with an error, want nil", data)
			}
			if tt.wantField != "" && e.Field != tt.wantField {
				t.Fatalf("Field = %q, want %q", e.Field, tt.wantField)
			}
			if !utf8.ValidString(e.Field) {
				t.Fatalf("Field %q is not valid UTF-8", e.Field)
			}
		})
	}
}

func TestProfileUnmarshalJSON(t *testing.T) {
	t.Run("OKViaEncodingJSON", func(t *testing.T) {
		var got struct{ P partmap.Profile }
		if err := json.Unmarshal([]byte(`{"P":{"a":"\ud83d\ude00","b.c":""}}`), &got); err != nil {
			t.Fatal(err)
		}
		if want := (partmap.Profile{"a": "\U0001F600", "b.c": ""}); !maps.Equal(got.P, want) {
			t.Fatalf("got %q, want %q", got.P, want)
		}
	})
	t.Run("OKReplacesOldContent", func(t *testing.T) {
		p := partmap.Profile{"old": "x"}
		if err := p.UnmarshalJSON([]byte(`{"new":"y"}`)); err != nil {
			t.Fatal(err)
		}
		if want := (partmap.Profile{"new": "y"}); !maps.Equal(p, want) {
			t.Fatalf("got %q, want %q", p, want)
		}
	})
	errs := []struct {
		name, in string
		code     partmap.Code
	}{
		{"ErrLoneSurrogate", `{"a":"\ud800"}`, partmap.EINVALIDUTF8},
		{"ErrRawInvalid", "{\"a\":\"\xff\"}", partmap.EINVALIDUTF8},
		{"ErrNumber", `{"a":1}`, partmap.ENONSTRING},
		{"ErrNull", `{"a":null}`, partmap.ENONSTRING},
		{"ErrDuplicate", `{"a":"1","a":"2"}`, partmap.EMALFORMEDJSON},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			var p partmap.Profile
			wantCode(t, p.UnmarshalJSON([]byte(tt.in)), tt.code)
			// encoding/json hands the raw bytes over, so the strictness holds there too.
			var q partmap.Profile
			wantCode(t, json.Unmarshal([]byte(tt.in), &q), tt.code)
		})
	}
}

// randomValidString returns a string of runes drawn from every range that
// matters to JSON: ASCII, controls, HTML-special bytes, the rest of the BMP
// on both sides of the surrogates, and the supplementary planes.
func randomValidString(rng *rand.Rand) string {
	special := []rune{'"', '\\', '/', '<', '>', '&', 0, 0x1f, 0x7f, 0x80, 0x7ff, 0x800,
		0xd7ff, 0xe000, 0xfeff, 0xfffd, 0xfffe, 0xffff, 0x10000, 0x10ffff, 0x2028, 0x2029, 0x301}
	var b strings.Builder
	n := rng.Intn(24)
	for i := 0; i < n; i++ {
		var r rune
		switch rng.Intn(6) {
		case 0:
			r = rune(rng.Intn(0x80))
		case 1:
			r = special[rng.Intn(len(special))]
		case 2:
			r = rune(0x80 + rng.Intn(0xd800-0x80))
		case 3:
			r = rune(0xe000 + rng.Intn(0x10000-0xe000))
		case 4:
			r = rune(0x10000 + rng.Intn(0x110000-0x10000))
		default:
			r = rune(0x20 + rng.Intn(0x5f))
		}
		b.WriteRune(r)
	}
	return b.String()
}

// escapeRandomly writes s as a JSON string, choosing for each rune between
// its raw bytes, a short escape and a \u escape (a surrogate pair above the
// BMP), with random hex case: every spelling must decode to s.
func escapeRandomly(rng *rand.Rand, s string) string {
	hexDigits := func(v rune) string {
		h := fmt.Sprintf("%04x", v)
		if rng.Intn(2) == 0 {
			h = strings.ToUpper(h)
		}
		return `\u` + h
	}
	short := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		mustEscape := r < 0x20 || r == '"' || r == '\\'
		switch choice := rng.Intn(3); {
		case choice == 0 && !mustEscape:
			b.WriteRune(r)
		case choice == 1 && short[r] != "":
			b.WriteString(short[r])
		case r >= 0x10000:
			r -= 0x10000
			b.WriteString(hexDigits(0xd800 + (r >> 10)))
			b.WriteString(hexDigits(0xdc00 + (r & 0x3ff)))
		default:
			b.WriteString(hexDigits(r))
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestJSONStringsRandom(t *testing.T) {
	// Whatever encoding/json writes for a valid string, partmap reads back as
	// that string, in a value and in a name.
	t.Run("OKEncodingJSONMarshal", func(t *testing.T) {
		rng := rand.New(rand.NewSource(7))
		for i := 0; i < 5000; i++ {
			s := randomValidString(rng)
			enc, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			body := `{"v":` + string(enc) + `,` + string(enc) + `:"n"}`
			if s == "v" {
				continue
			}
			got, err := partmap.ParseProfileJSON([]byte(body))
			if err != nil {
				t.Fatalf("ParseProfileJSON(%s) error: %v", body, err)
			}
			if got["v"] != s || got[s] != "n" || len(got) != 2 {
				t.Fatalf("ParseProfileJSON(%s) = %q, want v=%q and %q=n", body, got, s, s)
			}
		}
	})

	t.Run("OKQuick", func(t *testing.T) {
		cfg := &quick.Config{MaxCount: 3000, Rand: rand.New(rand.NewSource(8))}
		f := func(s string) bool {
			enc, err := json.Marshal(s)
			if err != nil {
				return false
			}
			got, err := partmap.ParseProfileJSON([]byte(`{"v":` + string(enc) + `}`))
			return err == nil && got["v"] == s
		}
		if err := quick.Check(f, cfg); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("OKAnySpelling", func(t *testing.T) {
		rng := rand.New(rand.NewSource(9))
		for i := 0; i < 5000; i++ {
			s := randomValidString(rng)
			body := `{"v":` + escapeRandomly(rng, s) + `}`
			got, err := partmap.ParseProfileJSON([]byte(body))
			if err != nil {
				t.Fatalf("ParseProfileJSON(%s) error: %v", body, err)
			}
			if got["v"] != s {
				t.Fatalf("ParseProfileJSON(%s) = %q, want %q", body, got["v"], s)
			}
			var std map[string]string
			if err := json.Unmarshal([]byte(body), &std); err != nil || std["v"] != s {
				t.Fatalf("encoding/json(%s) = %q, %v; the test's escaper is wrong", body, std["v"], err)
			}
		}
	})

	t.Run("OKMarshalRoundTrip", func(t *testing.T) {
		rng := rand.New(rand.NewSource(10))
		for i := 0; i < 2000; i++ {
			p := partmap.Profile{}
			for j := rng.Intn(6); j > 0; j-- {
				p[randomValidString(rng)] = randomValidString(rng)
			}
			data, err := p.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON(%q) error: %v", p, err)
			}
			got, err := partmap.ParseProfileJSON(data)
			if err != nil || !maps.Equal(got, p) {
				t.Fatalf("ParseProfileJSON(%s) = %q, %v; want %q", data, got, err, p)
			}
		}
	})

	// A lone escaped surrogate anywhere in an otherwise valid string is refused.
	t.Run("ErrLoneSurrogateAnywhere", func(t *testing.T) {
		rng := rand.New(rand.NewSource(11))
		for i := 0; i < 3000; i++ {
			prefix := escapeRandomly(rng, randomValidString(rng))
			suffix := escapeRandomly(rng, "x"+randomValidString(rng)) // "x": the next char is never a low surrogate
			lone := rune(0xd800 + rng.Intn(0x800))
			body := `{"v":` + prefix[:len(prefix)-1] + fmt.Sprintf(`\u%04x`, lone) + suffix[1:] + `}`
			_, err := partmap.ParseProfileJSON([]byte(body))
			if partmap.ErrorCode(err) != partmap.EINVALIDUTF8 {
				t.Fatalf("ParseProfileJSON(%s) err = %v, want %s", body, err, partmap.EINVALIDUTF8)
			}
		}
	})
}
