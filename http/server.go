package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/partmap/partmap"
)

// Server serves a partmap.Store. It holds no state of its own.
type Server struct {
	store  partmap.Store
	limits partmap.Limits
	log    *slog.Logger
	mux    *http.ServeMux
}

// ServerOptions configure NewServer. A nil *ServerOptions means defaults.
type ServerOptions struct {
	Limits *partmap.Limits // body limit; nil means partmap.DefaultLimits
	Logger *slog.Logger    // nil means slog.Default()
}

// NewServer returns a handler for store.
func NewServer(store partmap.Store, opts *ServerOptions) *Server {
	s := &Server{store: store, limits: partmap.DefaultLimits, log: slog.Default(), mux: http.NewServeMux()}
	if opts != nil && opts.Limits != nil {
		s.limits = *opts.Limits
	}
	if opts != nil && opts.Logger != nil {
		s.log = opts.Logger
	}
	s.mux.HandleFunc("POST "+BasePath+"/start", s.handleStart)
	s.mux.HandleFunc("GET "+BasePath+"/customer-profile", s.handleGetProfile)
	s.mux.HandleFunc("PUT "+BasePath+"/customer-profile", s.handlePutProfile)
	// Known paths with another method get 405; anything else gets 404.
	s.mux.HandleFunc(BasePath+"/start", s.methodNotAllowed("POST"))
	s.mux.HandleFunc(BasePath+"/customer-profile", s.methodNotAllowed("GET, PUT"))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, partmap.Errorf(partmap.ENOTFOUND, "no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

func (s *Server) methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		s.writeError(w, r, partmap.Errorf(partmap.EMETHOD, "%s is not allowed here; use %s", r.Method, allow))
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	now, err := s.store.Start(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"started": true, "alreadyStarted": !now})
}

func (s *Server) handleGetProfile(w http.ResponseWriter, r *http.Request) {
	q, err := query(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	email, err := emailParam(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.store.FindProfile(r.Context(), email)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("ETag", rec.Version.ETag())
	writeJSON(w, http.StatusOK, rec.Profile)
}

func (s *Server) handlePutProfile(w http.ResponseWriter, r *http.Request) {
	cond, err := condition(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	profile, err := partmap.ParseProfileJSON(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, created, err := s.store.UpsertProfile(r.Context(), profile, cond)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("ETag", rec.Version.ETag())
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", BasePath+"/customer-profile?emailAddress="+url.QueryEscape(rec.Profile.Email()))
	}
	writeJSON(w, status, rec.Profile)
}

// readBody reads the whole body, refusing it without buffering it all when
// it is over the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.limits.MaxBodyBytes
	tooLarge := &partmap.Error{Code: partmap.ETOOLARGE, Limit: "body", LimitBytes: limit,
		Message: "request body is over the limit of " + strconv.Itoa(limit) + " bytes"}
	if r.ContentLength > int64(limit) {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return nil, tooLarge
	case err != nil:
		return nil, partmap.Errorf(partmap.EINVALID, "reading the request body failed: %v", err)
	}
	return body, nil
}

// query parses the query string strictly: a malformed escape is an error,
// not a silently dropped parameter.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, partmap.Errorf(partmap.EINVALID, "malformed query string: %v", err)
	}
	return q, nil
}

func emailParam(q url.Values) (string, error) {
	v, ok := q["emailAddress"]
	if !ok {
		return "", &partmap.Error{Code: partmap.EINVALIDEMAIL, Field: partmap.FieldEmail,
			Message: "the emailAddress query parameter is required (encode a + in an address as %2B)"}
	}
	if len(v) != 1 {
		return "", partmap.Errorf(partmap.EINVALIDEMAIL, "emailAddress is given %d times; give it once", len(v))
	}
	return v[0], nil
}

// condition reads If-Match and If-None-Match. partmap issues one strong tag
// per profile, so a list of tags or a weak tag is refused rather than guessed.
func condition(r *http.Request) (partmap.Condition, error) {
	var c partmap.Condition
	if m := r.Header.Get("If-Match"); m != "" {
		v, err := partmap.ParseETag(m)
		if err != nil {
			return c, err
		}
		c.IfMatch = v
	}
	if m := r.Header.Get("If-None-Match"); m != "" {
		if m != "*" {
			return c, partmap.Errorf(partmap.EINVALID, "If-None-Match on a write must be *")
		}
		c.IfNoneMatch = true
	}
	return c, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // stored text reads back as it was written
	if err := enc.Encode(v); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = &partmap.Error{Code: partmap.EUNAVAILABLE, Message: "the request was cancelled or timed out", Err: err}
	}
	p := problemOf(err)
	if p.Status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", p.Status, "err", err)
	}
	switch partmap.ErrorCode(err) {
	case partmap.ELOCKCONFLICT, partmap.EUNAVAILABLE:
		w.Header().Set("Retry-After", "1")
	}
	p.Instance = r.URL.Path
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
}
