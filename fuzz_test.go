package partmap_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// Canonicalisation never panics, is idempotent, and places an email and its
// canonical form in the same partition.
func FuzzCanonicalEmail(f *testing.F) {
	for _, s := range []string{" Alice@Example.COM ", "bob@example.com", "", " \t\n\v\f\r", "é@x", "A\x00B", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, email string) {
		canon, p, err := partmap.Locate(email, partmap.DefaultPartitions)
		if err != nil {
			if code := partmap.ErrorCode(err); code != partmap.EINVALIDEMAIL && code != partmap.ETOOLARGE {
				t.Fatalf("%q: unexpected error code %s", email, code)
			}
			return
		}
		again, p2, err := partmap.Locate(canon, partmap.DefaultPartitions)
		if err != nil || again != canon || p2 != p {
			t.Fatalf("%q → %q (%s) → %q (%s), %v: not idempotent", email, canon, p, again, p2, err)
		}
		if canon == "" || strings.ContainsAny(canon, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") || strings.TrimSpace(canon) != strings.Trim(canon, " \t\n\v\f\r") {
			t.Fatalf("%q → %q is not canonical", email, canon)
		}
		if int(p) >= partmap.DefaultPartitions || p != partmap.PartitionOf(canon, partmap.DefaultPartitions) {
			t.Fatalf("%q → %s", email, p)
		}
	})
}

// jsonQuoteRaw quotes s as a JSON string but leaves every byte >= 0x20
// other than " and \ as it is, so that invalid UTF-8 reaches the parser.
func jsonQuoteRaw(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// A field value sent as raw bytes is accepted exactly when it is valid
// UTF-8, and then stored exactly: never a U+FFFD that was not sent.
func FuzzProfileValueUTF8(f *testing.F) {
	for _, s := range []string{"", "A中🙂", "\xff", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xe4\xb8", "\ufffd", "\"\\\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		// The value is sent both as a value and, prefixed, as a field name.
		body := `{"emailAddress":"a@example.com","f":` + jsonQuoteRaw(value) + `,` + jsonQuoteRaw("n:"+value) + `:"x"}`
		p, err := partmap.ParseProfileJSON([]byte(body))
		if utf8.ValidString(value) != (err == nil) {
			t.Fatalf("%q: valid UTF-8 %v, but parse error %v", value, utf8.ValidString(value), err)
		}
		if err != nil {
			if partmap.ErrorCode(err) != partmap.EINVALIDUTF8 {
				t.Fatalf("%q: %v, want invalid-utf8", value, err)
			}
			return
		}
		if _, named := p["n:"+value]; p["f"] != value || !named {
			t.Fatalf("stored %q, sent %q", p["f"], value)
		}
	})
}

// Any body: no panic; whatever is accepted is valid UTF-8 with no U+FFFD
// that the body did not contain; and it agrees with encoding/json whenever
// both accept.
func FuzzParseProfileJSON(f *testing.F) {
	for _, s := range []string{
		`{"emailAddress":"a@b","fullName":"Ada"}`, `{}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, `{"a":1}`, `{"a":null}`,
		`{"a":"b","a":"c"}`, `[`, ``, "\xef\xbb\xbf{}", `{"\u0061":"x"}`, `{"a":"\ufffd"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (map[string]*string, error){parseProfile, parsePatch} {
			got, err := parse(data)
			if err != nil {
				if partmap.ErrorCode(err) == partmap.EINTERNAL {
					t.Fatalf("%q: unclassified error %v", data, err)
				}
				continue
			}
			sentFFFD := strings.Contains(string(data), "\ufffd") || strings.Contains(strings.ToLower(string(data)), `\ufffd`)
			for k, v := range got {
				if !utf8.ValidString(k) || (v != nil && !utf8.ValidString(*v)) {
					t.Fatalf("%q: accepted invalid UTF-8", data)
				}
				if !sentFFFD && (strings.ContainsRune(k, utf8.RuneError) || (v != nil && strings.ContainsRune(*v, utf8.RuneError))) {
					t.Fatalf("%q: U+FFFD appeared", data)
				}
			}
			var std map[string]*string
			if json.Unmarshal(data, &std) == nil {
				for k, v := range got {
					if sv, ok := std[k]; !ok || (v == nil) != (sv == nil) || (v != nil && *v != *sv) {
						t.Fatalf("%q: field %q differs from encoding/json", data, k)
					}
				}
			}
		}
	})
}

func parseProfile(data []byte) (map[string]*string, error) {
	p, err := partmap.ParseProfileJSON(data)
	out := make(map[string]*string, len(p))
	for k, v := range p {
		out[k] = &v
	}
	return out, err
}

func parsePatch(data []byte) (map[string]*string, error) {
	p, err := partmap.ParsePatchJSON(data)
	return p, err
}

// Any line: no panic; whatever ParseRecordJSON accepts, MarshalRecordJSON
// writes so that it reads back the same, and a bare profile reads as
// ParseProfileJSON reads it.
func FuzzParseRecordJSON(f *testing.F) {
	for _, s := range []string{
		`{"emailAddress":"a@b","fullName":"Ada"}`, `{"profile":{"emailAddress":"a@b","c":"1"},"expires":{"profile":5,"fields":{"c":3}}}`,
		`{"profile":{}}`, `{"profile":{"a":"b"},"expires":{"fields":{"\u0061":1}}}`, `{"profile":{"a":"b"},"expires":{"fields":{"a":1,"a":2}}}`,
		`{"profile":[],"expires":{}}`, `{"profile":{"a":{"b":"c"}}}`, `{"expires":{"profile":-1},"profile":{"x":"y"}}`, `{"profile":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := partmap.ParseRecordJSON(line)
		if p, perr := partmap.ParseProfileJSON(line); perr == nil && (err != nil || !maps.Equal(p, rec.Profile) || !rec.Deadlines.IsZero()) {
			t.Fatalf("%q: a profile read as %+v, %v", line, rec, err)
		}
		if err != nil {
			return
		}
		out, err := partmap.MarshalRecordJSON(rec)
		if err != nil {
			t.Fatalf("%q: read as %+v, which does not write: %v", line, rec, err)
		}
		again, err := partmap.ParseRecordJSON(out)
		if err != nil || !maps.Equal(again.Profile, rec.Profile) || again.Deadlines.Profile != rec.Deadlines.Profile || !maps.Equal(again.Deadlines.Fields, rec.Deadlines.Fields) {
			t.Fatalf("%q → %+v → %s → %+v, %v", line, rec, out, again, err)
		}
	})
}
