package partmap

import "strings"

// A Condition's text is the values of HTTP's If-Match and If-None-Match:
// the HTTP routes take it as headers, and an operation's JSON form
// (OperationJSON) as its ifMatch and ifNoneMatch members.

// ParseCondition reads a write's condition from the values of If-Match and
// If-None-Match (nil when absent), as RFC 9110 defines them for a write:
// If-Match is * or a list of entity tags, one of which must strongly match
// (a weak tag, or one partmap did not issue, never does); If-None-Match on
// a write can only be *, create-only.
func ParseCondition(ifMatch, ifNoneMatch []string) (Condition, error) {
	var c Condition
	if ifMatch != nil {
		any, tags, err := ParseEntityTags("If-Match", ifMatch)
		if err != nil {
			return c, err
		}
		c.IfExists = any
		for _, t := range tags {
			v, err := ParseETag(t.Opaque)
			if t.Weak || err != nil {
				v = 0 // can never match
			}
			c.IfMatch = append(c.IfMatch, v)
		}
	}
	if ifNoneMatch != nil {
		any, _, err := ParseEntityTags("If-None-Match", ifNoneMatch)
		if err != nil {
			return c, err
		}
		if !any {
			return c, Errorf(EINVALID, "If-None-Match on a write must be *")
		}
		c.IfNoneMatch = true
	}
	return c, nil
}

// Values writes c as the values of If-Match and If-None-Match ("" for
// none), which ParseCondition reads back.
func (c Condition) Values() (ifMatch, ifNoneMatch string) {
	switch {
	case len(c.IfMatch) > 0:
		tags := make([]string, len(c.IfMatch))
		for i, v := range c.IfMatch {
			tags[i] = v.ETag()
		}
		ifMatch = strings.Join(tags, ", ")
	case c.IfExists:
		ifMatch = "*"
	}
	if c.IfNoneMatch {
		ifNoneMatch = "*"
	}
	return ifMatch, ifNoneMatch
}

// EntityTag is one tag of If-Match or If-None-Match.
type EntityTag struct {
	Weak   bool
	Opaque string // with its quotes
}

// ParseEntityTags parses the values of one conditional header: "*", or a
// comma-separated list of entity tags, possibly over several header lines.
func ParseEntityTags(header string, values []string) (any bool, tags []EntityTag, err error) {
	s := strings.TrimSpace(strings.Join(values, ","))
	bad := func(why string) error {
		return Errorf(EINVALID, "%s %s; give * or entity tags such as \"0123456789abcdef\"", header, why)
	}
	if s == "*" {
		return true, nil, nil
	}
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			break
		}
		var t EntityTag
		if rest, ok := strings.CutPrefix(s, "W/"); ok {
			t.Weak, s = true, rest
		}
		if s == "" || s[0] != '"' {
			return false, nil, bad("is not a list of entity tags")
		}
		end := strings.IndexByte(s[1:], '"') + 1
		if end == 0 {
			return false, nil, bad("is not a list of entity tags")
		}
		t.Opaque, s = s[:end+1], strings.TrimLeft(s[end+1:], " \t")
		if s != "" && s[0] != ',' {
			return false, nil, bad("is not a list of entity tags")
		}
		tags = append(tags, t)
	}
	if len(tags) == 0 {
		return false, nil, bad("is empty")
	}
	return false, tags, nil
}
