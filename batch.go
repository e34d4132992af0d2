package partmap

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxBatchEmails bounds one batch read (FindProfiles, ProjectProfiles).
const MaxBatchEmails = 1000

// CanonicalEmails canonicalises the emails of one batch read, in order, as
// CanonicalEmail does each. There must be at least one and at most
// MaxBatchEmails (EINVALID otherwise). The same email may come more than
// once. An error names the first bad email by its index and value, so that
// a caller can find it among a thousand.
func CanonicalEmails(emails []string) ([]string, error) {
	switch {
	case len(emails) == 0:
		return nil, Errorf(EINVALID, "name at least one email")
	case len(emails) > MaxBatchEmails:
		return nil, Errorf(EINVALID, "%d emails in one batch read; the limit is %d", len(emails), MaxBatchEmails)
	}
	out := make([]string, len(emails))
	for i, e := range emails {
		c, err := CanonicalEmail(e)
		if err != nil {
			return nil, atItem(err, "emails", i, e)
		}
		out[i] = c
	}
	return out, nil
}

// CheckBatchFields checks the field list of a batch projection: at least
// one name, none empty, none twice, each valid UTF-8. Errors (EINVALID,
// EINVALIDUTF8) name the first bad name by its index and value.
func CheckBatchFields(fields []string) error {
	if len(fields) == 0 {
		return Errorf(EINVALID, "fields is empty; name at least one field, or leave fields out for whole profiles")
	}
	seen := make(map[string]int, len(fields))
	for i, f := range fields {
		switch first, dup := seen[f]; {
		case f == "":
			return Errorf(EINVALID, "fields[%d] is an empty field name", i)
		case !utf8.ValidString(f):
			return Errorf(EINVALIDUTF8, "fields[%d] %s is not valid UTF-8", i, showItem(f))
		case dup:
			return &Error{Code: EINVALID, Field: f, Message: fmt.Sprintf("fields[%d] %q is named twice (first as fields[%d])", i, f, first)}
		}
		seen[f] = i
	}
	return nil
}

// atItem prefixes err's message with the list item it is about, keeping
// its code and limit.
func atItem(err error, list string, i int, value string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	out := *e
	out.Message = fmt.Sprintf("%s[%d] %s: %s", list, i, showItem(value), ErrorMessage(e))
	return &out
}

// showItem quotes a value for an error message, shortened: an email over
// its limit may be a megabyte long.
func showItem(s string) string {
	const max = 64
	if len(s) > max {
		return quoteBytes(s[:max]) + "…"
	}
	return quoteBytes(s)
}
