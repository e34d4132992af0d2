package partmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseProfileJSON decodes a profile from a flat JSON object of strings.
//
// encoding/json would silently turn invalid UTF-8 and escaped lone surrogates
// into U+FFFD; partmap stores exactly what was sent or nothing, so strings are
// decoded here, strictly. Errors name the offending field. Limits and the
// email are checked by the store, which every write path goes through.
func ParseProfileJSON(data []byte) (Profile, error) {
	var p Profile
	if err := p.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return p, nil
}

// ParseRecordJSON reads one line of an export, or of a bulk upsert: a
// profile, as ParseProfileJSON reads it, or a profile with its deadlines,
//
//	{"profile": {...}, "expires": {"profile": ms, "fields": {"name": ms, ...}}}
//
// in Unix milliseconds, as the change feed gives them; either member of
// expires may be left out. A profile's values are strings, so a line whose
// "profile" is an object is always the second form. The deadlines are not
// checked against the profile here: Deadlines.Check does that, as the
// store does.
func ParseRecordJSON(data []byte) (Record, error) {
	p, err := ParseProfileJSON(data)
	if err == nil {
		return Record{Profile: p}, nil
	}
	if rec, ok, rerr := parseTimedRecord(data); ok {
		return rec, rerr
	}
	return Record{}, err
}

// parseTimedRecord reads the second form of ParseRecordJSON; ok is false
// when data is not one (it has no "profile" that is an object).
func parseTimedRecord(data []byte) (rec Record, ok bool, err error) {
	if checkJSONSyntax(data) != nil {
		return Record{}, false, nil
	}
	members, ok := objectMembers(data)
	if !ok || len(members["profile"]) == 0 || members["profile"][0] != '{' {
		return Record{}, false, nil
	}
	for name := range members {
		if name != "profile" && name != "expires" {
			return Record{}, true, Errorf(EMALFORMEDJSON, "a profile with deadlines has only \"profile\" and \"expires\", not %q", name)
		}
	}
	if rec.Profile, err = ParseProfileJSON(members["profile"]); err != nil {
		return Record{}, true, err
	}
	raw, has := members["expires"]
	if !has {
		return rec, true, nil
	}
	expires, ok := objectMembers(raw)
	if !ok {
		return Record{}, true, Errorf(EMALFORMEDJSON, "expires is %s; it must be an object of \"profile\" and \"fields\"", jsonKind(raw[0]))
	}
	for name, v := range expires {
		switch name {
		case "profile":
			if rec.Deadlines.Profile, err = deadlineJSON("expires.profile", v); err != nil {
				return Record{}, true, err
			}
		case "fields":
			fields, ok := objectMembers(v)
			if !ok {
				return Record{}, true, Errorf(EMALFORMEDJSON, "expires.fields is %s; it must be an object of deadlines by field name", jsonKind(v[0]))
			}
			rec.Deadlines.Fields = make(map[string]int64, len(fields))
			for field, v := range fields {
				if rec.Deadlines.Fields[field], err = deadlineJSON("expires.fields."+field, v); err != nil {
					return Record{}, true, &Error{Code: EMALFORMEDJSON, Field: field, Message: ErrorMessage(err)}
				}
			}
			if len(rec.Deadlines.Fields) == 0 {
				rec.Deadlines.Fields = nil
			}
		default:
			return Record{}, true, Errorf(EMALFORMEDJSON, "expires has only \"profile\" and \"fields\", not %q", name)
		}
	}
	return rec, true, nil
}

// deadlineJSON reads a deadline in Unix ms: a JSON integer.
func deadlineJSON(name string, v []byte) (int64, error) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, Errorf(EMALFORMEDJSON, "%s is %s; it must be an integer, in Unix milliseconds", name, showItem(string(v)))
	}
	return n, nil
}

// objectMembers splits the JSON object data, whose syntax is checked, into
// its members' values by name; ok is false when data is not an object, or
// names a member twice or with a name that is not valid UTF-8.
func objectMembers(data []byte) (map[string][]byte, bool) {
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return nil, false
	}
	out := map[string][]byte{}
	for i = skipSpace(data, i+1); data[i] != '}'; {
		name, n, _, why := decodeJSONString(data[i:])
		if _, dup := out[name]; dup || why != "" {
			return nil, false
		}
		i = skipSpace(data, skipSpace(data, i+n)+1) // past the colon
		end := valueEnd(data, i)
		out[name] = data[i:end]
		if i = skipSpace(data, end); data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return out, true
}

// valueEnd returns the index just past the JSON value at data[i], whose
// syntax is checked.
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return jsonStringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch data[i] {
			case '"':
				i = jsonStringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[i])) {
		i++
	}
	return i
}

// MarshalRecordJSON writes what ParseRecordJSON reads: a record without
// deadlines as Profile.MarshalJSON writes its profile, byte for byte, and
// one with deadlines in the second form, its fields' deadlines in byte
// order of their names. The version is not written.
func MarshalRecordJSON(r Record) ([]byte, error) {
	p, err := r.Profile.MarshalJSON()
	if err != nil || r.Deadlines.IsZero() {
		return p, err
	}
	names := make([]string, 0, len(r.Deadlines.Fields))
	for name := range r.Deadlines.Fields {
		if !utf8.ValidString(name) {
			return nil, invalidUTF8("", name, "is not valid UTF-8")
		}
		names = append(names, name)
	}
	slices.Sort(names)
	buf := bytes.NewBuffer(make([]byte, 0, len(p)+48+24*len(names)))
	buf.WriteString(`{"profile":`)
	buf.Write(p)
	buf.WriteString(`,"expires":{`)
	if r.Deadlines.Profile != 0 {
		buf.WriteString(`"profile":`)
		buf.WriteString(strconv.FormatInt(r.Deadlines.Profile, 10))
		if len(names) > 0 {
			buf.WriteByte(',')
		}
	}
	if len(names) > 0 {
		buf.WriteString(`"fields":{`)
		for i, name := range names {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, name)
			buf.WriteByte(':')
			buf.WriteString(strconv.FormatInt(r.Deadlines.Fields[name], 10))
		}
		buf.WriteByte('}')
	}
	buf.WriteString(`}}`)
	return buf.Bytes(), nil
}

// Patch is an RFC 7396 merge patch of a flat profile: a non-nil value sets the
// field, a nil value deletes it, and unnamed fields stay as they are.
type Patch map[string]*string

// ParsePatchJSON decodes a merge patch with the same strictness as
// ParseProfileJSON; null is allowed and means delete.
func ParsePatchJSON(data []byte) (Patch, error) {
	fields, err := parseFlatObject(data, true)
	if err != nil {
		return nil, err
	}
	p := make(Patch, len(fields))
	for _, f := range fields {
		p[f.name] = f.value
	}
	return p, nil
}

// ParseStringListsJSON decodes a JSON object whose members are arrays of
// strings, such as a batch read's {"emails": [...], "fields": [...]}, with
// ParseProfileJSON's strictness: a string that is not valid UTF-8, raw or
// as an escaped lone surrogate, is EINVALIDUTF8, and a member named twice,
// or one that is not an array of strings, is EMALFORMEDJSON. Errors name
// the member and the index of the item.
func ParseStringListsJSON(data []byte) (map[string][]string, error) {
	i, err := openObject(data)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for data[i] != '}' {
		name, n, err := unquoteJSON(data[i:], "")
		if err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, Errorf(EMALFORMEDJSON, "member %q appears more than once", name)
		}
		i = skipSpace(data, i+n)
		i = skipSpace(data, i+1) // the colon
		if data[i] != '[' {
			return nil, Errorf(EMALFORMEDJSON, "%s is %s; it must be an array of strings", name, jsonKind(data[i]))
		}
		i = skipSpace(data, i+1)
		list := []string{}
		for data[i] != ']' {
			if data[i] != '"' {
				return nil, Errorf(EMALFORMEDJSON, "%s[%d] is %s; it must be a string", name, len(list), jsonKind(data[i]))
			}
			v, n, raw, why := decodeJSONString(data[i:])
			if why != "" {
				return nil, Errorf(EINVALIDUTF8, "%s[%d] %s %s", name, len(list), showItem(raw), why)
			}
			list = append(list, v)
			i = skipSpace(data, i+n)
			if data[i] == ',' {
				i = skipSpace(data, i+1)
			}
		}
		out[name] = list
		i = skipSpace(data, i+1)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return out, nil
}

// openObject checks data's syntax and returns where the members of the
// object it must be begin.
func openObject(data []byte) (int, error) {
	if err := checkJSONSyntax(data); err != nil {
		return 0, err
	}
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return 0, Errorf(EMALFORMEDJSON, "expected a JSON object, found %s", jsonKind(data[i]))
	}
	return skipSpace(data, i+1), nil
}

type jsonField struct {
	name  string
	value *string // nil for null
}

// parseFlatObject reads {"name": "value", ...}. Syntax is checked first by
// encoding/json's scanner, so the walk below only has to handle valid JSON.
func parseFlatObject(data []byte, allowNull bool) ([]jsonField, error) {
	i, err := openObject(data)
	if err != nil {
		return nil, err
	}
	var fields []jsonField
	seen := make(map[string]struct{})
	for data[i] != '}' {
		name, n, err := unquoteJSON(data[i:], "")
		if err != nil {
			return nil, err
		}
		if _, dup := seen[name]; dup {
			return nil, &Error{Code: EMALFORMEDJSON, Field: name, Message: fmt.Sprintf("field %q appears more than once", name)}
		}
		seen[name] = struct{}{}
		i = skipSpace(data, i+n)
		i = skipSpace(data, i+1) // the colon
		f := jsonField{name: name}
		switch c := data[i]; {
		case c == '"':
			v, n, err := unquoteJSON(data[i:], name)
			if err != nil {
				return nil, err
			}
			f.value = &v
			i += n
		case c == 'n' && allowNull:
			i += len("null")
		default:
			want := "a string"
			if allowNull {
				want = "a string, or null to delete it"
			}
			return nil, &Error{Code: ENONSTRING, Field: name,
				Message: fmt.Sprintf("field %q is %s; it must be %s", name, jsonKind(c), want)}
		}
		fields = append(fields, f)
		i = skipSpace(data, i)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return fields, nil
}

func checkJSONSyntax(data []byte) error {
	if flatObjectSyntax(data) {
		return nil
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return Errorf(EMALFORMEDJSON, "the body is empty; expected a JSON object")
	}
	if json.Valid(data) {
		return nil
	}
	var raw json.RawMessage // only to learn where the syntax breaks
	err := json.Unmarshal(data, &raw)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return Errorf(EMALFORMEDJSON, "malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	}
	return Errorf(EMALFORMEDJSON, "malformed JSON")
}

// flatObjectSyntax reports whether data is a JSON object whose values are
// all strings or null: the shape of nearly every body partmap reads. It
// accepts a subset of what json.Valid does, in one pass and without
// allocating, so the common case skips the general scanner, which cost a
// third of an import's parsing; anything else goes to that scanner, which
// also explains what is wrong.
func flatObjectSyntax(data []byte) bool {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for {
		if i = jsonStringEnd(data, i); i < 0 {
			return false
		}
		if i = skipSpace(data, i); i == len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		switch {
		case i < len(data) && data[i] == '"':
			if i = jsonStringEnd(data, i); i < 0 {
				return false
			}
		case len(data)-i >= 4 && string(data[i:i+4]) == "null":
			i += 4
		default:
			return false
		}
		if i = skipSpace(data, i); i == len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// jsonStringEnd returns the index just past the JSON string that starts at
// data[i], or -1 if there is none. Like encoding/json's scanner it leaves
// UTF-8 to the caller.
func jsonStringEnd(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i == len(data) {
				return -1
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(data)-i <= 4 {
					return -1
				}
				for _, h := range data[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func jsonKind(c byte) string {
	switch {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	}
	return "a number"
}

// unquoteJSON decodes the JSON string at the start of data (which the scanner
// has already checked) and returns it with the number of bytes it took. It
// rejects invalid UTF-8 and escaped surrogates that do not form a pair.
// field names the value's field; it is empty when data is a field name.
func unquoteJSON(data []byte, field string) (string, int, error) {
	s, n, raw, why := decodeJSONString(data)
	if why != "" {
		return "", 0, invalidUTF8(field, raw, why)
	}
	return s, n, nil
}

// decodeJSONString is unquoteJSON without the error: why says what is wrong
// with the string, whose text as sent is raw, and is empty when nothing is.
func decodeJSONString(data []byte) (s string, n int, raw, why string) {
	end := 1
	escaped := false
	for ; data[end] != '"'; end++ {
		if data[end] == '\\' {
			escaped = true
			end++ // the escaped byte is never the closing quote
		}
	}
	body := data[1:end]
	if !utf8.Valid(body) {
		return "", 0, string(body), "contains bytes that are not valid UTF-8"
	}
	if !escaped {
		return string(body), end + 1, "", ""
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch body[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(body[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				if r < 0xDC00 && i+6 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
					if lo := hex4(body[i+3 : i+7]); 0xDC00 <= lo && lo <= 0xDFFF {
						out = utf8.AppendRune(out, utf16.DecodeRune(r, lo))
						i += 6
						continue
					}
				}
				// Name a bad field name as it was sent, escapes and all.
				return "", 0, string(body), fmt.Sprintf("contains the escaped lone surrogate \\u%04x", r)
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, body[i])
		}
	}
	return string(out), end + 1, "", ""
}

func invalidUTF8(field, text, why string) *Error {
	if field == "" {
		return &Error{Code: EINVALIDUTF8, Field: strings.ToValidUTF8(text, "\uFFFD"),
			Message: fmt.Sprintf("field name %s %s", quoteBytes(text), why)}
	}
	return &Error{Code: EINVALIDUTF8, Field: field, Message: fmt.Sprintf("field %q %s", field, why)}
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// MarshalJSON writes the projection as one JSON object whose members are
// the requested fields in the requested order; a missing field is null.
func (p Projection) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, name := range p.Fields {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(&buf, name)
		buf.WriteByte(':')
		if v := p.Values[i]; v != nil {
			writeJSONString(&buf, *v)
		} else {
			buf.WriteString("null")
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON wrote, keeping the member order.
func (p *Projection) UnmarshalJSON(data []byte) error {
	fields, err := parseFlatObject(data, true)
	if err != nil {
		return err
	}
	p.Fields, p.Values = make([]string, len(fields)), make([]*string, len(fields))
	for i, f := range fields {
		p.Fields[i], p.Values[i] = f.name, f.value
	}
	return nil
}

// MarshalJSON writes the patch as a merge-patch object, refusing invalid
// UTF-8 rather than letting encoding/json replace it.
func (p Patch) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(p))
	for name := range p {
		names = append(names, name)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, name := range names {
		if !utf8.ValidString(name) {
			return nil, invalidUTF8("", name, "is not valid UTF-8")
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(&buf, name)
		buf.WriteByte(':')
		switch v := p[name]; {
		case v == nil:
			buf.WriteString("null")
		case !utf8.ValidString(*v):
			return nil, invalidUTF8(name, *v, "is not valid UTF-8")
		default:
			writeJSONString(&buf, *v)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
