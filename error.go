package partmap

import (
	"errors"
	"fmt"
	"time"
)

// Code classifies an error. Each code is also the stable name of an RFC 9457
// problem type (urn:partmap:problem:CODE), and Codes maps it to an HTTP status.
type Code string

const (
	EINVALID       Code = "invalid"                // a request parameter is wrong
	EINVALIDEMAIL  Code = "invalid-email"          // email is empty, blank or not ASCII
	EMALFORMEDJSON Code = "malformed-json"         // the body is not the JSON it should be
	ENONSTRING     Code = "non-string-value"       // a profile field is not a JSON string
	EINVALIDUTF8   Code = "invalid-utf8"           // a field name or value is not valid UTF-8
	ETOOMANYFIELDS Code = "too-many-fields"        // a profile has more fields than allowed
	ETOOLARGE      Code = "too-large"              // over a byte limit (body, field, profile)
	ENOTFOUND      Code = "not-found"              // no such profile
	EMETHOD        Code = "method-not-allowed"     // a known route with another method
	EMEDIATYPE     Code = "unsupported-media-type" // a body in a format the route does not take
	ETIMEOUT       Code = "request-timeout"        // the body did not arrive in time
	ENOTSTARTED    Code = "not-started"            // the directory has not been started
	ELOCKCONFLICT  Code = "lock-conflict"          // another writer holds the partition; retry
	ECONFLICT      Code = "conflict"               // the directory's state forbids it now (a resize in progress)
	EPRECONDITION  Code = "precondition-failed"    // If-Match / If-None-Match did not hold
	EEXISTS        Code = "exists"                 // the target of a rename, or an index of that name, already exists
	ENOTINTEGER    Code = "not-an-integer"         // increment of a value that is not an int64
	ENOTFLOAT      Code = "not-a-float"            // float increment of a value Redis would not read as a float
	EOVERFLOW      Code = "overflow"               // increment result outside int64, or an infinite float
	EKEYFIELD      Code = "key-field"              // the email field cannot be changed or deleted
	EUNAUTHORIZED  Code = "unauthorized"           // no valid bearer token
	EFORBIDDEN     Code = "forbidden"              // the token's scope is too small
	EUNAVAILABLE   Code = "unavailable"            // the store cannot serve now; retry
	EUNSUPPORTED   Code = "unsupported"            // this store cannot do it (a backup of Redis)
	ECURSOREXPIRED Code = "cursor-expired"         // the change feed no longer holds what follows the cursor
	EINTERNAL      Code = "internal"               // anything else; details are never shown
)

// CodeInfo is what the HTTP layer needs to know about a code.
type CodeInfo struct {
	Status int    // HTTP status
	Title  string // RFC 9457 title: short, the same for every occurrence
}

// Codes is the one table from codes to HTTP statuses. The HTTP client reads
// it in reverse, so a status never has to be interpreted on its own.
var Codes = map[Code]CodeInfo{
	EINVALID:       {400, "Invalid request"},
	EINVALIDEMAIL:  {400, "Invalid email address"},
	EMALFORMEDJSON: {400, "Malformed JSON"},
	ENONSTRING:     {400, "Field value is not a string"},
	EINVALIDUTF8:   {400, "Invalid UTF-8"},
	EKEYFIELD:      {400, "The email field cannot be changed"},
	ETOOMANYFIELDS: {413, "Too many fields"},
	ETOOLARGE:      {413, "Over a size limit"},
	ENOTFOUND:      {404, "Not found"},
	EMETHOD:        {405, "Method not allowed"},
	EMEDIATYPE:     {415, "Unsupported media type"},
	ETIMEOUT:       {408, "Request timeout"},
	ENOTSTARTED:    {409, "Directory not started"},
	ELOCKCONFLICT:  {409, "Partition locked by another writer"},
	ECONFLICT:      {409, "Conflict with the directory's state"},
	EPRECONDITION:  {412, "Precondition failed"},
	EEXISTS:        {409, "Already exists"},
	ENOTINTEGER:    {409, "Field is not an integer"},
	ENOTFLOAT:      {409, "Field is not a float"},
	EOVERFLOW:      {409, "Overflow"},
	EUNAUTHORIZED:  {401, "Unauthorized"},
	EFORBIDDEN:     {403, "Forbidden"},
	EUNAVAILABLE:   {503, "Service unavailable"},
	EUNSUPPORTED:   {501, "Not supported by this store"},
	ECURSOREXPIRED: {410, "Cursor older than the feed's retention"},
	EINTERNAL:      {500, "Internal error"},
}

// Error is partmap's one error type. Message is safe to show to a user; Err,
// the underlying cause, is for logs only.
type Error struct {
	Code    Code
	Message string
	Field   string // the profile field concerned, if any

	// Limit names the limit that was exceeded ("body", "fieldValue", ...) and
	// LimitBytes gives its size in bytes. Set with ETOOLARGE; ETOOMANYFIELDS
	// sets Limit to "fields" and states the count in Message.
	Limit      string
	LimitBytes int

	// RetryAfter is, for a retryable error, how long a retry will
	// certainly fail (the whole-map lock's remaining time, say); 0 when
	// unknown.
	RetryAfter time.Duration
	// Operation is, for an error of a transaction (Store.Transact), the
	// position of the operation concerned, counted from 1; 0 when the
	// error is not one operation's.
	Operation int

	Err error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = Codes[e.Code].Title
	}
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, msg, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, partmap.ErrNotFound) and friends compare codes.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is. Each matches any *Error with the same code.
var (
	ErrNotFound     = &Error{Code: ENOTFOUND}
	ErrNotStarted   = &Error{Code: ENOTSTARTED}
	ErrLockConflict = &Error{Code: ELOCKCONFLICT}
	ErrPrecondition = &Error{Code: EPRECONDITION}
)

// Errorf returns an *Error with a formatted, user-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, EINTERNAL for any error partmap did not
// classify (or classified with a code Codes does not know), and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return "" // before e, which As makes escape: a success allocates nothing
	}
	var e *Error
	if errors.As(err, &e) {
		if _, known := Codes[e.Code]; known {
			return e.Code
		}
	}
	return EINTERNAL
}

// ErrorMessage returns the user-safe message of err. The text of an
// unclassified error never leaks: it may carry paths or internal state.
func ErrorMessage(err error) string {
	var e *Error
	switch code := ErrorCode(err); {
	case code == "":
		return ""
	case code != EINTERNAL && errors.As(err, &e) && e.Message != "":
		return e.Message
	default:
		return Codes[code].Title
	}
}
