// Package http serves a partmap.Store over HTTP and provides a Go client that
// implements the same partmap.Store contract, so that callers cannot tell a
// local store from a remote one.
//
// Errors travel as RFC 9457 problem documents whose type is
// urn:partmap:problem:CODE; partmap.Codes gives each code its status, and the
// client reads the same table in reverse.
package http

// Each resource has one file that holds its handlers, its client methods and
// the wire types both share. request.go parses requests; server.go routes
// them and writes errors; client.go sends, retries and reads errors.

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
	Operation  int    `json:"operation,omitempty"` // a transaction's failed operation, from 1
}
