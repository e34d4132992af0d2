package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
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

// Server serves a partmap.Store. It holds no state of its own.
type Server struct {
	store   partmap.Store
	limits  partmap.Limits
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler // mux, instrumented
	tokens  *Tokens      // nil: no authentication
	metrics *metrics
}

// ServerOptions configure NewServer. A nil *ServerOptions means defaults.
type ServerOptions struct {
	Limits *partmap.Limits // body limit; nil means partmap.DefaultLimits
	Logger *slog.Logger    // nil means slog.Default()
	Tokens *Tokens         // bearer tokens to require; nil means none
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
	if opts != nil {
		s.tokens = opts.Tokens
	}
	routes := []struct {
		method, path string
		scope        Scope    // what a token needs, when tokens are required
		params       []string // the query parameters the route takes
		handle       handler
	}{
		{"POST", "/start", ScopeAdmin, nil, s.handleStart},
		{"GET", "/customer-profile", ScopeRead, []string{"emailAddress", "fields", "field"}, s.handleGetProfile},
		{"PUT", "/customer-profile", ScopeWrite, []string{"emailAddress"}, s.handlePutProfile},
		{"PATCH", "/customer-profile", ScopeWrite, []string{"emailAddress"}, s.handlePatchProfile},
		{"DELETE", "/customer-profile", ScopeWrite, []string{"emailAddress"}, s.handleDeleteProfile},
		{"POST", "/customer-profile/increment", ScopeWrite, []string{"emailAddress", "field", "by"}, s.handleIncrement},
		{"GET", "/customer-profiles", ScopeRead, []string{"limit", "cursor", anyParam}, s.handleListProfiles},
		{"GET", "/partitions", ScopeRead, nil, s.handleListPartitions},
		{"POST", "/customer-profiles/bulk", ScopeWrite, nil, s.handleBulk},
		{"GET", "/customer-profiles/export", ScopeRead, nil, s.handleExport},
		{"GET", "/check", ScopeAdmin, []string{"partition"}, s.handleCheck},
		{"POST", "/whole-map-lock", ScopeAdmin, []string{"seconds"}, s.handleLockWholeMap},
		{"DELETE", "/whole-map-lock", ScopeAdmin, []string{"lease"}, s.handleUnlockWholeMap},
		{"POST", "/resize", ScopeAdmin, []string{"partitions"}, s.handleResize},
		{"GET", "/resize", ScopeAdmin, nil, s.handleResizeStatus},
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
func (s *Server) serve(scope Scope, params []string, h handler) http.HandlerFunc {
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
		if err != nil {
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

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request, q url.Values) error {
	now, err := s.store.Start(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]bool{"started": true, "alreadyStarted": !now})
}

func (s *Server) handleGetProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	fields, err := fieldsParam(q)
	if err != nil {
		return err
	}
	var version partmap.Version
	var body any
	if fields == nil {
		rec, err := s.store.FindProfile(r.Context(), email)
		version, body = rec.Version, rec.Profile
		if err != nil {
			return err
		}
	} else {
		proj, err := s.store.ProjectProfile(r.Context(), email, fields)
		version, body = proj.Version, proj
		if err != nil {
			return err
		}
	}
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

func (s *Server) handlePutProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	cond, err := condition(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, "application/json")
	if err != nil {
		return err
	}
	profile, err := partmap.ParseProfileJSON(body)
	if err != nil {
		return err
	}
	// A PUT may name its profile in the URL too (its Location); then the
	// two must agree, or the write would land somewhere unexpected.
	if _, named := q["emailAddress"]; named {
		if err := sameEmail(q, profile); err != nil {
			return err
		}
	}
	rec, created, err := s.store.UpsertProfile(r.Context(), profile, cond)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", rec.Version.ETag())
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", BasePath+"/customer-profile?emailAddress="+url.QueryEscape(rec.Profile.Email()))
	}
	return writeJSON(w, status, rec.Profile)
}

// patchReply is the body of a PATCH reply.
type patchReply struct {
	Profile       partmap.Profile `json:"profile"`
	FieldsAdded   int             `json:"fieldsAdded"`
	FieldsDeleted int             `json:"fieldsDeleted"`
}

func (s *Server) handlePatchProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	cond, err := condition(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, "application/merge-patch+json", "application/json")
	if err != nil {
		return err
	}
	patch, err := partmap.ParsePatchJSON(body)
	if err != nil {
		return err
	}
	res, err := s.store.PatchProfile(r.Context(), email, patch, cond)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", res.Record.Version.ETag())
	return writeJSON(w, http.StatusOK, patchReply{res.Record.Profile, res.FieldsAdded, res.FieldsDeleted})
}

func (s *Server) handleDeleteProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	cond, err := condition(r)
	if err != nil {
		return err
	}
	if err := s.store.DeleteProfile(r.Context(), email, cond); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// incrementReply is the body of an increment reply. The value is a decimal
// string, as stored, because JSON numbers lose precision past 2^53.
type incrementReply struct {
	Email string `json:"emailAddress"`
	Field string `json:"field"`
	Value string `json:"value"`
}

func (s *Server) handleIncrement(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	cond, err := condition(r)
	if err != nil {
		return err
	}
	field, err := oneParam(q, "field", true)
	if err != nil {
		return err
	}
	by := int64(1)
	if v, err := oneParam(q, "by", false); err != nil {
		return err
	} else if v != "" {
		if by, err = strconv.ParseInt(v, 10, 64); err != nil {
			return partmap.Errorf(partmap.EINVALID, "by must be an integer from %d to %d, not %q", math.MinInt64, math.MaxInt64, v)
		}
	}
	inc, err := s.store.IncrementField(r.Context(), email, field, by, cond)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", inc.Version.ETag())
	return writeJSON(w, http.StatusOK, incrementReply{inc.Email, inc.Field, strconv.FormatInt(inc.Value, 10)})
}

type listReply struct {
	Profiles   []partmap.Profile `json:"profiles"`
	NextCursor *string           `json:"nextCursor"`
}

func (s *Server) handleListProfiles(w http.ResponseWriter, r *http.Request, q url.Values) error {
	var opts partmap.ListOptions
	if v, err := oneParam(q, "limit", false); err != nil {
		return err
	} else if v != "" {
		if opts.Limit, err = strconv.Atoi(v); err != nil || opts.Limit < 1 {
			return partmap.Errorf(partmap.EINVALID, "limit must be an integer from 1 to %d, not %q", partmap.MaxPageLimit, v)
		}
	}
	cursor, err := oneParam(q, "cursor", false)
	if err != nil {
		return err
	}
	opts.Cursor = cursor
	// Every other parameter is a search condition, FIELD=VALUE; the store
	// refuses fields that are not indexed.
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name == "limit" || name == "cursor" {
			continue
		}
		v, err := oneParam(q, name, false)
		if err != nil {
			return err
		}
		opts.Where = append(opts.Where, partmap.Match{Field: name, Value: v})
	}
	page, err := s.store.ListProfiles(r.Context(), opts)
	if err != nil {
		return err
	}
	reply := listReply{Profiles: make([]partmap.Profile, len(page.Profiles))}
	for i, rec := range page.Profiles {
		reply.Profiles[i] = rec.Profile
	}
	if page.NextCursor != "" {
		reply.NextCursor = &page.NextCursor
	}
	return writeJSON(w, http.StatusOK, reply)
}

type partitionJSON struct {
	Name     string `json:"name"`
	Profiles int64  `json:"profiles"`
}

type partitionsReply struct {
	Partitions      []partitionJSON `json:"partitions"`
	PartitionsInUse int             `json:"partitionsInUse"`
	TotalProfiles   int64           `json:"totalProfiles"`
	TotalPartitions int             `json:"totalPartitions"`
	Indexes         []string        `json:"indexes"`
}

func (s *Server) handleListPartitions(w http.ResponseWriter, r *http.Request, q url.Values) error {
	stats, err := s.store.ListPartitions(r.Context())
	if err != nil {
		return err
	}
	reply := partitionsReply{Partitions: make([]partitionJSON, len(stats.Partitions)),
		PartitionsInUse: len(stats.Partitions), TotalProfiles: stats.TotalProfiles,
		TotalPartitions: stats.TotalPartitions, Indexes: stats.Indexes}
	if reply.Indexes == nil {
		reply.Indexes = []string{}
	}
	for i, p := range stats.Partitions {
		reply.Partitions[i] = partitionJSON{p.Partition.String(), p.Profiles}
	}
	return writeJSON(w, http.StatusOK, reply)
}

// BulkResultJSON is one line's outcome in a bulk reply.
type BulkResultJSON struct {
	Line    int      `json:"line"`
	Status  int      `json:"status"`
	Email   string   `json:"emailAddress,omitempty"`
	ETag    string   `json:"etag,omitempty"`
	Problem *problem `json:"problem,omitempty"`
}

// BulkReplyJSON is the body of a bulk reply.
type BulkReplyJSON struct {
	Created  int              `json:"created"`
	Replaced int              `json:"replaced"`
	Failed   int              `json:"failed"`
	Results  []BulkResultJSON `json:"results"`
}

// handleBulk upserts the profiles of a JSON Lines body, one per line. Every
// line gets a result; a bad line fails alone.
func (s *Server) handleBulk(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := s.readBodyLimit(w, r, MaxBulkBodyBytes, "application/x-ndjson", "application/jsonl", "application/json")
	if err != nil {
		return err
	}
	reply := BulkReplyJSON{Results: []BulkResultJSON{}} // [] for an empty body, never null
	var profiles []partmap.Profile
	var lines []int
	for n, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p, err := partmap.ParseProfileJSON(line)
		if err != nil {
			pr := s.problem(r, err)
			reply.Results = append(reply.Results, BulkResultJSON{Line: n + 1, Status: pr.Status, Problem: &pr})
			continue
		}
		profiles = append(profiles, p)
		lines = append(lines, n+1)
	}
	results, err := s.store.UpsertProfiles(r.Context(), profiles)
	if err != nil {
		return err
	}
	for i, res := range results {
		out := BulkResultJSON{Line: lines[i], Status: http.StatusOK}
		switch {
		case res.Err != nil:
			pr := s.problem(r, res.Err)
			out.Status, out.Problem = pr.Status, &pr
		case res.Created:
			out.Status = http.StatusCreated
		}
		if res.Err == nil {
			out.Email, out.ETag = res.Record.Profile.Email(), res.Record.Version.ETag()
		}
		reply.Results = append(reply.Results, out)
	}
	slices.SortFunc(reply.Results, func(a, b BulkResultJSON) int { return a.Line - b.Line })
	for _, res := range reply.Results {
		switch res.Status {
		case http.StatusCreated:
			reply.Created++
		case http.StatusOK:
			reply.Replaced++
		default:
			reply.Failed++
		}
	}
	return writeJSON(w, http.StatusOK, reply)
}

// MaxBulkBodyBytes bounds a bulk request body.
const MaxBulkBodyBytes = 16 << 20

// readBody reads the whole body, refusing it without buffering it all when
// it is over the limit. The body must be UTF-8 in one of mediaTypes (a
// missing Content-Type is taken as the first) and not content-encoded. A
// leading UTF-8 byte order mark is framing, not text, and is dropped.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, mediaTypes ...string) ([]byte, error) {
	return s.readBodyLimit(w, r, s.limits.MaxBodyBytes, mediaTypes...)
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
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

func checkMediaType(r *http.Request, types []string) error {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return partmap.Errorf(partmap.EMEDIATYPE, "Content-Encoding %q is not supported; send the body as it is", ce)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
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

func sameEmail(q url.Values, profile partmap.Profile) error {
	inURL, err := emailParam(q)
	if err != nil {
		return err
	}
	a, errA := partmap.CanonicalEmail(inURL)
	b, errB := partmap.CanonicalEmail(profile[partmap.FieldEmail])
	if errA != nil {
		return errA
	}
	if errB == nil && a != b {
		return &partmap.Error{Code: partmap.EKEYFIELD, Field: partmap.FieldEmail,
			Message: fmt.Sprintf("the URL names %s but the body's emailAddress is %s", a, b)}
	}
	return nil
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
	return email, nil
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

// condition reads If-Match and If-None-Match as RFC 9110 defines them for a
// write: If-Match is * or a list of entity tags, one of which must strongly
// match (a weak tag, or one partmap did not issue, never does); If-None-Match
// on a write can only be *, create-only.
func condition(r *http.Request) (partmap.Condition, error) {
	var c partmap.Condition
	if values := r.Header.Values("If-Match"); values != nil {
		any, tags, err := parseEntityTags("If-Match", values)
		if err != nil {
			return c, err
		}
		c.IfExists = any
		for _, t := range tags {
			v, err := partmap.ParseETag(t.opaque)
			if t.weak || err != nil {
				v = 0 // can never match
			}
			c.IfMatch = append(c.IfMatch, v)
		}
	}
	if values := r.Header.Values("If-None-Match"); values != nil {
		any, _, err := parseEntityTags("If-None-Match", values)
		if err != nil {
			return c, err
		}
		if !any {
			return c, partmap.Errorf(partmap.EINVALID, "If-None-Match on a write must be *")
		}
		c.IfNoneMatch = true
	}
	return c, nil
}

// notModified reports whether a GET's If-None-Match names the current
// version; it uses the weak comparison RFC 9110 prescribes for GET.
func notModified(r *http.Request, v partmap.Version) (bool, error) {
	values := r.Header.Values("If-None-Match")
	if values == nil {
		return false, nil
	}
	any, tags, err := parseEntityTags("If-None-Match", values)
	if err != nil || any {
		return any, err
	}
	for _, t := range tags {
		if t.opaque == v.ETag() {
			return true, nil
		}
	}
	return false, nil
}

type entityTag struct {
	weak   bool
	opaque string // with its quotes
}

// parseEntityTags parses the values of one conditional header: "*", or a
// comma-separated list of entity tags, possibly over several header lines.
func parseEntityTags(header string, values []string) (any bool, tags []entityTag, err error) {
	s := strings.TrimSpace(strings.Join(values, ","))
	bad := func(why string) error {
		return partmap.Errorf(partmap.EINVALID, "%s %s; give * or entity tags such as \"0123456789abcdef\"", header, why)
	}
	if s == "*" {
		return true, nil, nil
	}
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			break
		}
		var t entityTag
		if rest, ok := strings.CutPrefix(s, "W/"); ok {
			t.weak, s = true, rest
		}
		if s == "" || s[0] != '"' {
			return false, nil, bad("is not a list of entity tags")
		}
		end := strings.IndexByte(s[1:], '"') + 1
		if end == 0 {
			return false, nil, bad("is not a list of entity tags")
		}
		t.opaque, s = s[:end+1], strings.TrimLeft(s[end+1:], " \t")
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
	w.Header().Set("Content-Type", "application/json")
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
	if p.Status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", p.Status, "err", err)
	}
	return p
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := s.problem(r, err)
	if p.Type == ProblemTypePrefix+string(partmap.ELOCKCONFLICT) {
		s.metrics.conflicts.Inc()
	}
	if p.Type == ProblemTypePrefix+string(partmap.ELOCKCONFLICT) || p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	p.Instance = r.URL.Path
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
}
