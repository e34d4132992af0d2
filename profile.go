package partmap

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The documented fields of a customer profile. Only FieldEmail is required;
// any other field name is allowed within Limits.
const (
	FieldEmail        = "emailAddress"
	FieldFullName     = "fullName"
	FieldCompanyName  = "companyName"
	FieldCustomerTier = "customerTier"
)

// DocumentedFields lists the documented fields in their display order.
var DocumentedFields = []string{FieldEmail, FieldFullName, FieldCompanyName, FieldCustomerTier}

// Profile is a flat record of named text fields, like a Redis hash. Names are
// literal ("name.first" is one name) and values are text partmap never parses.
// A stored profile always holds FieldEmail, set to its canonical email.
type Profile map[string]string

// Email returns the profile's email field as stored.
func (p Profile) Email() string { return p[FieldEmail] }

// Clone returns a copy that shares nothing with p.
func (p Profile) Clone() Profile {
	c := make(Profile, len(p))
	for k, v := range p {
		c[k] = v
	}
	return c
}

// FieldNames returns the names in display order: the documented fields first,
// then the others in byte order. Stored order carries no meaning.
func (p Profile) FieldNames() []string {
	names := make([]string, 0, len(p))
	for _, f := range DocumentedFields {
		if _, ok := p[f]; ok {
			names = append(names, f)
		}
	}
	start := len(names)
	for k := range p {
		if !slices.Contains(DocumentedFields, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names[start:])
	return names
}

// MarshalJSON writes the fields in display order, so responses are stable.
func (p Profile) MarshalJSON() ([]byte, error) {
	size := 3 // {}, and the newline a reply appends
	for name, value := range p {
		size += len(name) + len(value) + 6
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteByte('{')
	for i, name := range p.FieldNames() {
		value := p[name]
		// encoding/json would replace invalid UTF-8 with U+FFFD; refuse instead.
		if !utf8.ValidString(name) {
			return nil, invalidUTF8("", name, "is not valid UTF-8")
		}
		if !utf8.ValidString(value) {
			return nil, invalidUTF8(name, value, "is not valid UTF-8")
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(buf, name)
		buf.WriteByte(':')
		writeJSONString(buf, value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON is the strict decoder of ParseProfileJSON, without limits
// checks, so that a client can read what a server sent.
func (p *Profile) UnmarshalJSON(data []byte) error {
	fields, err := parseFlatObject(data, false)
	if err != nil {
		return err
	}
	*p = make(Profile, len(fields))
	for _, f := range fields {
		(*p)[f.name] = *f.value
	}
	return nil
}

// writeJSONString writes s as a JSON string. Unlike encoding/json it leaves
// <, > and & alone, so stored text reads back as it was written.
func writeJSONString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.WriteString(s[last:i])
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		}
		last = i + 1
	}
	buf.WriteString(s[last:])
	buf.WriteByte('"')
}

// Limits bound what a profile may hold. All sizes are in bytes of UTF-8,
// never characters: input over a limit is refused, never truncated.
type Limits struct {
	MaxFields          int // fields in one profile, emailAddress included
	MaxFieldNameBytes  int
	MaxFieldValueBytes int
	MaxProfileBytes    int // sum of every field's name and value bytes
	MaxBodyBytes       int // one HTTP request body
}

// DefaultLimits are generous for customer profiles and keep one record small
// enough that reading it never dominates a request: the whole profile's
// bytes bound a record, and the field count and name length only what one
// field may be. Redis's own hash tests fit (a hash of over 1,024 fields,
// names of over 256 bytes).
var DefaultLimits = Limits{
	MaxFields:          2048,
	MaxFieldNameBytes:  1024,
	MaxFieldValueBytes: 32 << 10,
	MaxProfileBytes:    128 << 10,
	MaxBodyBytes:       1 << 20,
}

// CheckField validates one field name and value against the limits and UTF-8.
func (l Limits) CheckField(name, value string) error {
	if name == "" {
		return &Error{Code: EINVALID, Message: "field name is empty"}
	}
	if !utf8.ValidString(name) {
		return invalidUTF8("", name, "is not valid UTF-8")
	}
	if len(name) > l.MaxFieldNameBytes {
		return &Error{Code: ETOOLARGE, Field: name, Limit: "fieldName", LimitBytes: l.MaxFieldNameBytes,
			Message: fmt.Sprintf("field name is %d bytes; the limit is %d", len(name), l.MaxFieldNameBytes)}
	}
	if !utf8.ValidString(value) {
		return invalidUTF8(name, value, "is not valid UTF-8")
	}
	if len(value) > l.MaxFieldValueBytes {
		return &Error{Code: ETOOLARGE, Field: name, Limit: "fieldValue", LimitBytes: l.MaxFieldValueBytes,
			Message: fmt.Sprintf("field %q is %d bytes; the limit is %d", name, len(value), l.MaxFieldValueBytes)}
	}
	return nil
}

// CheckProfile validates a whole profile: each field, the field count and the
// total size. It does not look at the email; see CanonicalEmail.
func (l Limits) CheckProfile(p Profile) error {
	if len(p) > l.MaxFields {
		return &Error{Code: ETOOMANYFIELDS, Limit: "fields",
			Message: fmt.Sprintf("profile has %d fields; the limit is %d", len(p), l.MaxFields)}
	}
	size := 0
	for name, value := range p {
		if err := l.CheckField(name, value); err != nil {
			return err
		}
		size += len(name) + len(value)
	}
	if size > l.MaxProfileBytes {
		return &Error{Code: ETOOLARGE, Limit: "profile", LimitBytes: l.MaxProfileBytes,
			Message: fmt.Sprintf("profile is %d bytes; the limit is %d", size, l.MaxProfileBytes)}
	}
	return nil
}

// quoteBytes shows a possibly invalid string so that a user can find it.
func quoteBytes(s string) string { return strconv.QuoteToASCII(s) }

// Version identifies one committed state of a profile. Every write gives the
// profile a new, random, non-zero version, so a version is never reused even
// when a profile is deleted and created again.
type Version uint64

// ETag is the version as a strong HTTP entity tag.
func (v Version) ETag() string {
	const digits = "0123456789abcdef"
	var b [18]byte
	b[0], b[17] = '"', '"'
	for i := 16; i >= 1; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b[:])
}

// ParseETag reads an entity tag made by ETag: 16 lower-case hex digits in
// quotes. Strong comparison is exact, so "00AB" is not "00ab", and weak tags
// never match; both are refused.
func ParseETag(s string) (Version, error) {
	if len(s) != 18 || s[0] != '"' || s[17] != '"' {
		return 0, badETag(s)
	}
	for _, c := range s[1:17] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, badETag(s)
		}
	}
	v, _ := strconv.ParseUint(s[1:17], 16, 64)
	if v == 0 {
		return 0, badETag(s)
	}
	return Version(v), nil
}

func badETag(s string) error {
	return Errorf(EINVALID, "entity tag %q is not one partmap issued", s)
}

// Record is a stored profile and its version.
type Record struct {
	Profile   Profile
	Version   Version
	Deadlines Deadlines // when the profile and its fields expire; see Live
	// Committed is when the write that last changed the profile was
	// committed, in Unix milliseconds: the time of its change feed event.
	// A store sets it on the records it reads (the HTTP client on those of
	// FindProfiles and the change feed only). It is 0 on a record last
	// written before stores kept it, and in what a write returns.
	Committed int64
}

// Condition makes a write conditional, like HTTP's If-Match and
// If-None-Match. The zero value always holds.
type Condition struct {
	// IfMatch, when not empty, requires the profile to exist at one of these
	// versions. Version 0 is never issued, so it stands for a tag that can
	// never match (a weak or foreign entity tag).
	IfMatch     []Version
	IfExists    bool // the profile must exist (If-Match: *)
	IfNoneMatch bool // the profile must not exist (If-None-Match: *)
}

// IfMatch is the condition that the profile is at one of these versions.
func IfMatch(versions ...Version) Condition { return Condition{IfMatch: versions} }

// Check reports whether the condition holds for the current record, if any.
func (c Condition) Check(current *Record) error {
	switch {
	case c.IfNoneMatch && current != nil:
		return Errorf(EPRECONDITION, "the profile already exists (If-None-Match: *)")
	case c.IfExists && current == nil:
		return Errorf(EPRECONDITION, "the profile does not exist (If-Match: *)")
	case len(c.IfMatch) > 0 && current == nil:
		return Errorf(EPRECONDITION, "the profile does not exist (If-Match)")
	case len(c.IfMatch) > 0 && !slices.ContainsFunc(c.IfMatch, func(v Version) bool { return v != 0 && v == current.Version }):
		return Errorf(EPRECONDITION, "the profile is at version %s, which If-Match does not name", current.Version.ETag())
	}
	return nil
}
