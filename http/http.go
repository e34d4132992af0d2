// Package http serves a partmap.Store over HTTP and provides a Go client that
// implements the same partmap.Store contract, so that callers cannot tell a
// local store from a remote one.
//
// Errors travel as RFC 9457 problem documents whose type is
// urn:partmap:problem:CODE; partmap.Codes gives each code its status, and the
// client reads the same table in reverse.
package http

import (
	"errors"
	"strings"

	"github.com/partmap/partmap"
)

// BasePath is where the original design mounts the directory's routes.
const BasePath = "/patterns/hash-partitioned-attribute-map"

// ProblemTypePrefix prefixes every problem type URI.
const ProblemTypePrefix = "urn:partmap:problem:"

// problem is an RFC 9457 problem document with partmap's extension members.
type problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail,omitempty"`
	Instance   string `json:"instance,omitempty"`
	Field      string `json:"field,omitempty"`
	Limit      string `json:"limit,omitempty"`
	LimitBytes int    `json:"limitBytes,omitempty"`
}

func problemOf(err error) problem {
	code := partmap.ErrorCode(err)
	info, ok := partmap.Codes[code]
	if !ok {
		code, info = partmap.EINTERNAL, partmap.Codes[partmap.EINTERNAL]
	}
	p := problem{Type: ProblemTypePrefix + string(code), Title: info.Title, Status: info.Status, Detail: partmap.ErrorMessage(err)}
	var e *partmap.Error
	if errors.As(err, &e) && code != partmap.EINTERNAL {
		p.Field, p.Limit, p.LimitBytes = e.Field, e.Limit, e.LimitBytes
	}
	return p
}

// errorOf turns a problem document back into the *partmap.Error it came from.
func errorOf(p problem, status int) *partmap.Error {
	code := codeForStatus(status)
	if slug, ok := strings.CutPrefix(p.Type, ProblemTypePrefix); ok {
		if _, known := partmap.Codes[partmap.Code(slug)]; known {
			code = partmap.Code(slug)
		}
	}
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	return &partmap.Error{Code: code, Message: msg, Field: p.Field, Limit: p.Limit, LimitBytes: p.LimitBytes}
}

// codeForStatus classifies a response that carries no partmap problem type,
// such as one from a proxy in between, by reading partmap.Codes in reverse:
// a status that only one code has maps to that code. 5xx statuses from a
// proxy are gateway trouble, which is unavailable, except a plain 500.
func codeForStatus(status int) partmap.Code {
	if code, ok := codeByStatus[status]; ok {
		return code
	}
	if status >= 502 && status <= 504 {
		return partmap.EUNAVAILABLE
	}
	return partmap.EINTERNAL
}

// codeByStatus holds the statuses of partmap.Codes that one code has, plus
// the generic code of two that several share.
var codeByStatus = func() map[int]partmap.Code {
	seen := map[int][]partmap.Code{}
	for code, info := range partmap.Codes {
		seen[info.Status] = append(seen[info.Status], code)
	}
	out := map[int]partmap.Code{400: partmap.EINVALID, 413: partmap.ETOOLARGE}
	for status, codes := range seen {
		if len(codes) == 1 {
			out[status] = codes[0]
		}
	}
	return out
}()
