package http

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
)

// Server serves a partmap.Store. It holds no state of its own.
type Server struct {
	store   partmap.Store
	writes  partmap.Store // store, or its writes grouped (ServerOptions.GroupWrites)
	limits  partmap.Limits
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler // mux, instrumented
	tokens  *auth.Tokens // nil: no authentication
	metrics *metrics

	// feedsDone is closed when Serve begins to shut down: long polls and
	// event streams end then, instead of holding the shutdown up.
	feedsDone     chan struct{}
	stopFeedsOnce sync.Once
}

// ServerOptions configure NewServer. A nil *ServerOptions means defaults.
type ServerOptions struct {
	Limits *partmap.Limits // body limit; nil means partmap.DefaultLimits
	Logger *slog.Logger    // nil means slog.Default()
	Tokens *auth.Tokens    // bearer tokens to require; nil means none
	// GroupWrites commits the single-profile writes of concurrent
	// requests together (partmap.GroupWrites): for a store in process,
	// where a transaction of many partitions costs what their writes do
	// alone, less each commit's share.
	GroupWrites bool
}

// NewServer returns a handler for store.
func NewServer(store partmap.Store, opts *ServerOptions) *Server {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	s := &Server{store: store, limits: *cmp.Or(o.Limits, &partmap.DefaultLimits), log: cmp.Or(o.Logger, slog.Default()), tokens: o.Tokens,
		mux: http.NewServeMux(), feedsDone: make(chan struct{})}
	s.writes = store
	if o.GroupWrites {
		s.writes = partmap.GroupWrites(store)
	}
	routes := []struct {
		method, path string
		scope        auth.Scope // what a token needs, when tokens are required
		params       []string   // the query parameters the route takes
		handle       handler
	}{
		{"POST", "/start", auth.ScopeAdmin, nil, s.handleStart},
		{"GET", "/customer-profile", auth.ScopeRead, []string{"emailAddress", "fields", "field"}, s.handleGetProfile},
		{"PUT", "/customer-profile", auth.ScopeWrite, []string{"emailAddress"}, s.handlePutProfile},
		{"PATCH", "/customer-profile", auth.ScopeWrite, []string{"emailAddress"}, s.handlePatchProfile},
		{"DELETE", "/customer-profile", auth.ScopeWrite, []string{"emailAddress"}, s.handleDeleteProfile},
		{"POST", "/customer-profile/increment", auth.ScopeWrite, []string{"emailAddress", "field", "by", "float"}, s.handleIncrement},
		{"POST", "/customer-profile/expire", auth.ScopeWrite, []string{"emailAddress", "fields", "field", "seconds", "milliseconds", "at", "atMilliseconds", "condition"}, s.operationRoute(partmap.OpExpire)},
		{"POST", "/customer-profile/persist", auth.ScopeWrite, []string{"emailAddress", "fields", "field"}, s.operationRoute(partmap.OpPersist)},
		{"GET", "/customer-profile/ttl", auth.ScopeRead, []string{"emailAddress", "fields", "field"}, s.handleTTL},
		{"POST", "/customer-profile/set-if-absent", auth.ScopeWrite, []string{"emailAddress"}, s.operationRoute(partmap.OpSetIfAbsent)},
		{"POST", "/customer-profile/get-delete", auth.ScopeWrite, []string{"emailAddress", "fields", "field"}, s.operationRoute(partmap.OpGetDelete)},
		{"POST", "/customer-profile/get-expire", auth.ScopeWrite, []string{"emailAddress", "fields", "field", "seconds", "milliseconds", "at", "atMilliseconds", "persist"}, s.operationRoute(partmap.OpGetExpire)},
		{"POST", "/customer-profile/set-fields", auth.ScopeWrite, []string{"emailAddress", "condition", "seconds", "milliseconds", "at", "atMilliseconds", "keepTTL"}, s.operationRoute(partmap.OpSetFields)},
		{"POST", "/customer-profile/rename", auth.ScopeWrite, []string{"emailAddress", "to"}, s.handleRename},
		{"POST", "/transactions", auth.ScopeWrite, nil, s.handleTransaction},
		{"GET", "/changes", auth.ScopeRead, []string{"after", "limit", "wait", "from", "to", "emailAddress"}, s.handleChanges},
		{"GET", "/customer-profiles", auth.ScopeRead, []string{"limit", "cursor", anyParam}, s.handleListProfiles},
		{"GET", "/partitions", auth.ScopeRead, nil, s.handleListPartitions},
		{"POST", "/customer-profiles/bulk", auth.ScopeWrite, nil, s.handleBulk},
		{"POST", "/customer-profiles/get", auth.ScopeRead, nil, s.handleGetProfiles},
		{"GET", "/customer-profiles/export", auth.ScopeRead, nil, s.handleExport},
		{"GET", "/check", auth.ScopeAdmin, []string{"partition"}, s.handleCheck},
		{"GET", "/checks", auth.ScopeAdmin, []string{"from", "to"}, s.handleChecks},
		{"POST", "/whole-map-lock", auth.ScopeAdmin, []string{"seconds"}, s.handleLockWholeMap},
		{"DELETE", "/whole-map-lock", auth.ScopeAdmin, []string{"lease"}, s.handleUnlockWholeMap},
		{"POST", "/resize", auth.ScopeAdmin, []string{"partitions"}, s.handleResize},
		{"GET", "/resize", auth.ScopeAdmin, nil, s.handleResizeStatus},
		{"GET", "/backup", auth.ScopeAdmin, nil, s.handleBackup},
		{"GET", "/indexes", auth.ScopeRead, nil, s.handleListIndexes},
		{"POST", "/indexes", auth.ScopeAdmin, nil, s.handleCreateIndex},
		{"DELETE", "/indexes/{name}", auth.ScopeAdmin, nil, s.handleDropIndex},
		{"GET", "/indexes/{name}/search", auth.ScopeRead, []string{"query", "sortBy", "order", "limit", "offset", "cursor", "return", "noContent"}, s.handleSearch},
	}
	allowed := map[string][]string{}
	for _, r := range routes {
		s.mux.HandleFunc(r.method+" "+BasePath+r.path, s.serve(r.scope, r.params, r.handle))
		allowed[r.path] = append(allowed[r.path], r.method)
		if r.method == "GET" {
			allowed[r.path] = append(allowed[r.path], "HEAD") // net/http serves HEAD with GET
		}
	}
	// Known paths with another method get 405; anything else gets 404.
	for path, methods := range allowed {
		s.mux.HandleFunc(BasePath+path, s.methodNotAllowed(strings.Join(methods, ", ")))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, partmap.Errorf(partmap.ENOTFOUND, "no route for %s %s", r.Method, r.URL.Path))
	})
	s.metrics = newMetrics(store)
	s.routeOpenAPI()
	s.routeOps()
	s.routeConsole()
	s.handler = s.metrics.instrument(s.mux)
	return s
}

// anyParam in a route's parameters lets its handler take any name: a
// search takes its conditions as FIELD=VALUE.
const anyParam = "*"

// handler serves one route. It gets the parsed query and returns its error,
// so that every failure is answered the same way.
type handler func(w http.ResponseWriter, r *http.Request, q url.Values) error

// serve checks the token, then parses the query strictly, refusing malformed
// escapes and unknown parameters (a misspelt "feilds" must not silently mean
// "all fields").
func (s *Server) serve(scope auth.Scope, params []string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(w, r, scope); err != nil {
			s.writeError(w, r, err)
			return
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			err = partmap.Errorf(partmap.EINVALID, "malformed query string: %v", err)
		}
		for name := range q {
			if err == nil && !slices.Contains(params, name) && !slices.Contains(params, anyParam) {
				err = unknownParam(name, params)
			}
		}
		if err == nil {
			err = h(w, r, q)
		}
		var midway errStreamFailed
		switch {
		case errors.As(err, &midway):
			// Already told in the stream's error trailer.
			s.log.Error("stream failed midway", "method", r.Method, "path", r.URL.Path, "err", midway.err)
		case err != nil:
			s.writeError(w, r, err)
		}
	}
}

func unknownParam(name string, params []string) error {
	if len(params) == 0 {
		return partmap.Errorf(partmap.EINVALID, "unknown query parameter %q; this route takes none", name)
	}
	return partmap.Errorf(partmap.EINVALID, "unknown query parameter %q; this route takes %s", name, strings.Join(params, ", "))
}

func (s *Server) methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		s.writeError(w, r, partmap.Errorf(partmap.EMETHOD, "%s is not allowed here; use %s", r.Method, allow))
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// contentTypeJSON is shared by every reply, to save an allocation each;
// nothing modifies a header value in place.
var contentTypeJSON = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	var b []byte
	if m, ok := v.(json.Marshaler); ok {
		// Profiles and projections write their own compact JSON; passing
		// them through an Encoder would only validate and copy it again.
		var err error
		if b, err = m.MarshalJSON(); err != nil {
			// Stored text that no longer encodes is the store's fault, not
			// the request's.
			return &partmap.Error{Code: partmap.EINTERNAL, Message: "a stored value could not be encoded", Err: err}
		}
		b = append(b, '\n')
	} else {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // stored text reads back as it was written
		if err := enc.Encode(v); err != nil {
			return err
		}
		b = buf.Bytes()
	}
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	w.Write(b)
	return nil
}

// problem classifies err for a reply: a cancelled or timed-out context is
// unavailable, and anything that is the server's fault is logged, since its
// details never reach the client.
func (s *Server) problem(r *http.Request, err error) problem {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = &partmap.Error{Code: partmap.EUNAVAILABLE, Message: "the request was cancelled or timed out", Err: err}
	}
	p := problemOf(err)
	// 501 is the store saying what it cannot do, not a failure.
	if p.Status >= 500 && p.Status != http.StatusNotImplemented {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", p.Status, "err", err)
	}
	return p
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
		p.Field, p.Limit, p.LimitBytes, p.Operation = e.Field, e.Limit, e.LimitBytes, e.Operation
	}
	return p
}

// retryAfterSeconds is when a retry may succeed, in whole seconds: when
// the whole-map lock that refused the request ends, if known, else 1.
func retryAfterSeconds(err error) int {
	var e *partmap.Error
	if errors.As(err, &e) && e.RetryAfter > time.Second {
		return int((e.RetryAfter + time.Second - 1) / time.Second)
	}
	return 1
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := s.problem(r, err)
	if p.Type == ProblemTypePrefix+string(partmap.ELOCKCONFLICT) {
		s.metrics.conflicts.Inc()
	}
	if p.Type == ProblemTypePrefix+string(partmap.ELOCKCONFLICT) || p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(err)))
	}
	p.Instance = r.URL.Path
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
}
