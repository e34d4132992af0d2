package http

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// readBody reads the whole body, refusing it without buffering it all when
// it is over the limit. The body must be UTF-8 in one of mediaTypes (a
// missing Content-Type is taken as the first) and not content-encoded. A
// leading UTF-8 byte order mark is framing, not text, and is dropped.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, mediaTypes ...string) ([]byte, error) {
	return s.readBodyLimit(w, r, s.limits.MaxBodyBytes, mediaTypes...)
}

// readJSON reads the request body, of one of mediaTypes, and parses it.
func readJSON[T any](s *Server, w http.ResponseWriter, r *http.Request, parse func([]byte) (T, error), mediaTypes ...string) (T, error) {
	body, err := s.readBody(w, r, mediaTypes...)
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(body)
}

func (s *Server) readBodyLimit(w http.ResponseWriter, r *http.Request, limit int, mediaTypes ...string) ([]byte, error) {
	if err := checkMediaType(r, mediaTypes); err != nil {
		return nil, err
	}
	tooLarge := &partmap.Error{Code: partmap.ETOOLARGE, Limit: "body", LimitBytes: limit,
		Message: "request body is over the limit of " + strconv.Itoa(limit) + " bytes"}
	if r.ContentLength > int64(limit) {
		return nil, tooLarge
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, int64(limit)), r.ContentLength)
	var maxErr *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &maxErr):
		return nil, tooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		return nil, partmap.Errorf(partmap.ETIMEOUT, "the request body did not arrive within the server's read timeout")
	case err != nil:
		return nil, &partmap.Error{Code: partmap.EINVALID, Message: "the request body could not be read", Err: err}
	}
	return bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), nil
}

// readAll reads body whole, into a buffer of its declared length when it
// has one: io.ReadAll grows from 512 bytes, copying as it goes.
func readAll(body io.Reader, length int64) ([]byte, error) {
	if length <= 0 {
		return io.ReadAll(body)
	}
	buf := make([]byte, 0, length+1) // +1: EOF is read without growing
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		case len(buf) == cap(buf): // longer than declared: the server stops it
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

func checkMediaType(r *http.Request, types []string) error {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return partmap.Errorf(partmap.EMEDIATYPE, "Content-Encoding %q is not supported; send the body as it is", ce)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" || slices.Contains(types, ct) { // the usual case, without parsing
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && slices.Contains(types, mt) {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	return partmap.Errorf(partmap.EMEDIATYPE, "Content-Type must be %s (UTF-8), not %q", strings.Join(types, " or "), ct)
}

// emailParam returns the query's one emailAddress.
func emailParam(q url.Values) (string, error) {
	if _, ok := q["emailAddress"]; !ok {
		return "", &partmap.Error{Code: partmap.EINVALIDEMAIL, Field: partmap.FieldEmail,
			Message: "the emailAddress query parameter is required (encode a + in an address as %2B)"}
	}
	email, err := oneParam(q, "emailAddress", true)
	if err != nil {
		return "", &partmap.Error{Code: partmap.EINVALIDEMAIL, Field: partmap.FieldEmail, Message: partmap.ErrorMessage(err)}
	}
	if email == "" {
		// Refused as the store refuses it: an operation's members take an
		// empty email for a missing one (partmap.OperationJSON).
		_, err = partmap.CanonicalEmail(email)
	}
	return email, err
}

// emailAndFields reads a route's emailAddress and its fields (fieldsParam).
func emailAndFields(q url.Values) (string, []string, error) {
	email, err := emailParam(q)
	if err != nil {
		return "", nil, err
	}
	fields, err := fieldsParam(q)
	return email, fields, err
}

// emailAndCondition reads what a write of one profile names: its
// emailAddress, and its If-Match and If-None-Match.
func emailAndCondition(r *http.Request, q url.Values) (string, partmap.Condition, error) {
	email, err := emailParam(q)
	if err != nil {
		return "", partmap.Condition{}, err
	}
	cond, err := condition(r)
	return email, cond, err
}

// oneParam returns a query parameter given at most once.
func oneParam(q url.Values, name string, required bool) (string, error) {
	v := q[name]
	switch {
	case len(v) > 1:
		return "", partmap.Errorf(partmap.EINVALID, "%s is given %d times; give it once", name, len(v))
	case len(v) == 0 && required:
		return "", partmap.Errorf(partmap.EINVALID, "the %s query parameter is required", name)
	case len(v) == 0:
		return "", nil
	}
	return v[0], nil
}

// fieldsParam reads a projection: fields=a,b,c, or field=NAME repeated for
// names that contain a comma. nil means no projection.
func fieldsParam(q url.Values) ([]string, error) {
	lists, singles := q["fields"], q["field"]
	if lists == nil && singles == nil {
		return nil, nil
	}
	fields := []string{}
	for _, l := range lists {
		fields = append(fields, strings.Split(l, ",")...)
	}
	fields = append(fields, singles...)
	for _, f := range fields {
		if !utf8.ValidString(f) {
			return nil, partmap.Errorf(partmap.EINVALIDUTF8, "a field name in the query is not valid UTF-8")
		}
	}
	return fields, nil
}

// condition reads a write's If-Match and If-None-Match.
func condition(r *http.Request) (partmap.Condition, error) {
	return partmap.ParseCondition(r.Header.Values("If-Match"), r.Header.Values("If-None-Match"))
}

// writeRead answers a read of a profile at version with body and the
// version's ETag, or 304 when the request's If-None-Match names it.
func writeRead(w http.ResponseWriter, r *http.Request, version partmap.Version, body any) error {
	nm, err := notModified(r, version)
	if err != nil {
		return err // a 400 describes no version of the profile
	}
	w.Header().Set("ETag", version.ETag())
	if nm {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeJSON(w, http.StatusOK, body)
}

// notModified reports whether a GET's If-None-Match names the current
// version; it uses the weak comparison RFC 9110 prescribes for GET.
func notModified(r *http.Request, v partmap.Version) (bool, error) {
	values := r.Header.Values("If-None-Match")
	if values == nil {
		return false, nil
	}
	any, tags, err := partmap.ParseEntityTags("If-None-Match", values)
	if err != nil || any {
		return any, err
	}
	for _, t := range tags {
		if t.Opaque == v.ETag() {
			return true, nil
		}
	}
	return false, nil
}
