package http_test

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

// The OpenAPI document, http/openapi.json, is held three ways: it is a valid
// OpenAPI 3.1 document; it names every code of partmap.Codes and describes
// every route on the mux; and real requests and replies, on the happy paths
// and on every error the server can be made to give, match it.
//
// kin-openapi validates it: it loads and validates OpenAPI 3.1 documents, and
// openapi3filter checks the schemas of a 3.1 document with a JSON Schema
// 2020-12 validator (type arrays with "null", const, oneOf of problem types).

var openAPIDoc = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("openapi.json")
	if err != nil {
		return nil, err
	}
	return doc, doc.Validate(loader.Context)
})

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

func TestOpenAPIIsValid31(t *testing.T) {
	doc := loadOpenAPI(t)
	if !doc.IsOpenAPI31OrLater() || doc.IsOpenAPI32OrLater() {
		t.Fatalf("openapi is %q, want 3.1.x", doc.OpenAPI)
	}
	// kin-openapi checks the examples of parameters and media types, but not
	// a schema's own (JSON Schema's "examples" annotation); check those here.
	for name, s := range doc.Components.Schemas {
		for _, ex := range s.Value.Examples {
			if err := s.Value.VisitJSON(ex, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("schema %s: example %v: %v", name, ex, err)
			}
		}
	}
	// The validation is not a formality: documents broken in ways that only
	// 3.1, or only a careful reader, would notice are refused.
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"OK", func(map[string]any) {}},
		{"ErrResponseWithoutDescription", func(d map[string]any) {
			delete(dig(d, "components", "responses", "Unauthorized"), "description")
		}},
		{"ErrDanglingRef", func(d map[string]any) {
			delete(dig(d, "components", "schemas"), "NotFoundProblem")
		}},
		{"ErrBooleanExclusiveMinimum", func(d map[string]any) { // OpenAPI 3.0's form; 3.1 wants a number
			dig(d, "components", "schemas", "Problem", "properties", "status")["exclusiveMinimum"] = true
		}},
		{"ErrPathParameterNotRequired", func(d map[string]any) {
			dig(d, "components", "parameters", "pprofProfile")["required"] = false
		}},
		{"ErrExampleAgainstSchema", func(d map[string]any) {
			dig(d, "components", "parameters", "limit")["example"] = 5000
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			tc.mutate(d)
			b, _ := json.Marshal(d)
			loader := openapi3.NewLoader()
			changed, err := loader.LoadFromData(b)
			if err == nil {
				err = changed.Validate(loader.Context)
			}
			if ok := tc.name == "OK"; ok != (err == nil) {
				t.Fatalf("validation: %v", err)
			}
		})
	}
}

// dig walks a decoded JSON document down the keys.
func dig(v map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		v = v[k].(map[string]any)
	}
	return v
}

// problemSchemas maps each problem type the document describes to the
// schema that describes it.
func problemSchemas(t *testing.T, doc *openapi3.T) map[string]*openapi3.Schema {
	t.Helper()
	out := map[string]*openapi3.Schema{}
	for name, s := range doc.Components.Schemas {
		typ := s.Value.Properties["type"]
		if typ == nil || typ.Value.Const == nil {
			continue
		}
		uri, _ := typ.Value.Const.(string)
		if _, dup := out[uri]; dup {
			t.Errorf("two schemas describe %s", uri)
		}
		out[uri] = s.Value
		if !strings.HasPrefix(uri, pmhttp.ProblemTypePrefix) {
			t.Errorf("schema %s describes the problem type %q, which is not urn:partmap:problem:CODE", name, uri)
		}
	}
	return out
}

func constOf(s *openapi3.Schema, prop string) any {
	if p := s.Properties[prop]; p != nil {
		return p.Value.Const
	}
	return nil
}

// Every code has a documented problem type with its status and title, every
// problem response lists only codes of its status, and no route's error is
// anything but a problem document, except where Go answers for partmap.
func TestOpenAPIDocumentsEveryCode(t *testing.T) {
	doc := loadOpenAPI(t)
	types := problemSchemas(t, doc)
	for code, info := range partmap.Codes {
		s := types[pmhttp.ProblemTypePrefix+string(code)]
		if s == nil {
			t.Errorf("no problem type for %s", code)
			continue
		}
		if status, _ := constOf(s, "status").(float64); int(status) != info.Status {
			t.Errorf("%s: status %v, want %d", code, constOf(s, "status"), info.Status)
		}
		if title := constOf(s, "title"); title != info.Title {
			t.Errorf("%s: title %v, want %q", code, title, info.Title)
		}
	}
	for uri := range types {
		if _, ok := partmap.Codes[partmap.Code(strings.TrimPrefix(uri, pmhttp.ProblemTypePrefix))]; !ok {
			t.Errorf("%s is not a code of partmap.Codes", uri)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, rr := range op.Responses.Map() {
				where := fmt.Sprintf("%s %s %s", method, path, status)
				problem := rr.Value.Content.Get("application/problem+json")
				if problem == nil {
					if status >= "400" && status != "431" && strings.HasPrefix(path, pmhttp.BasePath+"/") {
						t.Errorf("%s: an error of a directory route that is not a problem document", where)
					}
					continue
				}
				refs := problem.Schema.Value.OneOf
				if problem.Schema.Ref != "" {
					refs = openapi3.SchemaRefs{problem.Schema}
				}
				if len(refs) == 0 {
					t.Errorf("%s: the problem schema names no problem type", where)
				}
				for _, ref := range refs {
					status2, _ := constOf(ref.Value, "status").(float64)
					if fmt.Sprint(status2) != status {
						t.Errorf("%s: lists %s, whose status is %v", where, ref.Ref, status2)
					}
				}
			}
		}
	}
}

// muxPatterns returns the patterns registered on mux. net/http does not list
// them, so this reads its routing tree by reflection; it fails rather than
// finding nothing should a Go release reshape that tree.
func muxPatterns(t *testing.T, mux *http.ServeMux) []string {
	t.Helper()
	tree := reflect.ValueOf(mux).Elem().FieldByName("tree")
	if !tree.IsValid() {
		t.Fatal("http.ServeMux has no routing tree any more: update muxPatterns")
	}
	seen := map[uintptr]bool{}
	var out []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() && !seen[v.Pointer()] {
				seen[v.Pointer()] = true
				walk(v.Elem())
			}
		case reflect.Struct:
			switch {
			case v.Type().PkgPath() != "net/http":
			case v.Type().Name() == "pattern":
				out = append(out, v.FieldByName("str").String())
			default:
				for i := range v.NumField() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		}
	}
	walk(tree)
	slices.Sort(out)
	out = slices.Compact(out)
	if !slices.Contains(out, "GET /healthz") || !slices.Contains(out, "/") {
		t.Fatalf("muxPatterns found %q, which lacks GET /healthz or /: update it", out)
	}
	return out
}

// docPath turns a mux pattern's path into the document's spelling:
// {name...} is {name}, and {$} (the exact end) is the empty string.
func docPath(path string) string {
	path = strings.ReplaceAll(path, "{$}", "")
	path = strings.ReplaceAll(path, "...}", "}")
	if path == "" {
		return "/"
	}
	return path
}

// sameTemplate compares paths whatever their wildcards are called.
func sameTemplate(a, b string) bool {
	norm := func(p string) string {
		parts := strings.Split(p, "/")
		for i, s := range parts {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				parts[i] = "{}"
			}
		}
		return strings.Join(parts, "/")
	}
	return norm(a) == norm(b)
}

// The document describes every route on the mux, so that a route cannot be
// added without it. Routes the document has that the mux lacks are allowed
// (see notYetRouted); the test of replies catches any other.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	srv := pmhttp.NewServer(nil, nil) // only for its routes: no request reaches the store
	find := func(path string) *openapi3.PathItem {
		for p, item := range doc.Paths.Map() {
			if sameTemplate(p, path) {
				return item
			}
		}
		return nil
	}
	for _, pattern := range muxPatterns(t, srv.Mux()) {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = "", pattern
		}
		if !strings.HasPrefix(path, "/") {
			t.Errorf("pattern %q has a host; the document cannot say so", pattern)
			continue
		}
		if pattern == "/" {
			// The catch-all answers 404 for every path nothing else takes.
			if doc.Components.Responses["NoRoute"] == nil {
				t.Error("the catch-all / is not described: no NoRoute response")
			}
			continue
		}
		item := find(docPath(path))
		switch {
		case item == nil:
			t.Errorf("%s: the document has no path %s", pattern, docPath(path))
		case method == "":
			// Any method: the 405 answer of a directory path, or pprof.
			if len(item.Operations()) == 0 {
				t.Errorf("%s: the document describes no method of it", pattern)
			}
			if strings.HasPrefix(path, pmhttp.BasePath+"/") && doc.Components.Responses["MethodNotAllowed"] == nil {
				t.Errorf("%s answers 405, which the document does not describe", pattern)
			}
		default:
			methods := []string{method}
			if method == http.MethodGet {
				methods = append(methods, http.MethodHead) // the mux serves HEAD with GET
			}
			for _, m := range methods {
				if item.GetOperation(m) == nil {
					t.Errorf("%s: the document has no %s %s", pattern, m, docPath(path))
				}
			}
		}
	}
}

// notYetRouted are the operations of routes that another branch is adding
// while this one is written (the online resize); the document describes them
// already, and TestOpenAPIMatchesServer drives them once they are on the mux.
// Then this list changes nothing, and can be emptied.
var notYetRouted = []string{}

// faultStore is a real Pebble store whose reads can be made to fail, for the
// 500 and 503 replies that a healthy store never gives, and whose checks can
// be made to report drift, which a healthy store never has.
type faultStore struct {
	*pebble.Store
	mu    sync.Mutex
	fault error
	drift []partmap.IndexDrift
}

func (s *faultStore) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = err
}

func (s *faultStore) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault
}

func (s *faultStore) FindProfile(ctx context.Context, email string) (partmap.Record, error) {
	if err := s.err(); err != nil {
		return partmap.Record{}, err
	}
	return s.Store.FindProfile(ctx, email)
}

func (s *faultStore) driftWith(drift ...partmap.IndexDrift) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drift = drift
}

func (s *faultStore) CheckPartition(ctx context.Context, p partmap.Partition) (partmap.PartitionCheck, error) {
	if err := s.err(); err != nil {
		return partmap.PartitionCheck{}, err
	}
	c, err := s.Store.CheckPartition(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Drift = append(c.Drift, s.drift...)
	return c, err
}

// ExportProfiles fails, when told to, after the first profile, when the
// stream has started and only a trailer can say so.
func (s *faultStore) ExportProfiles(ctx context.Context, fn func(partmap.Record) error) error {
	n := 0
	return s.Store.ExportProfiles(ctx, func(rec partmap.Record) error {
		if n++; n > 1 {
			if err := s.err(); err != nil {
				return err
			}
		}
		return fn(rec)
	})
}

// Changes fails, when told to, on a read that may wait: a long poll, or an
// event stream's reads after its first, when only its "error" event can
// say so.
func (s *faultStore) Changes(ctx context.Context, q partmap.ChangeQuery) (partmap.ChangePage, error) {
	if err := s.err(); err != nil && q.Wait > 0 {
		return partmap.ChangePage{}, err
	}
	return s.Store.Changes(ctx, q)
}

func (s *faultStore) ListPartitions(ctx context.Context) (partmap.PartitionStats, error) {
	if err := s.err(); err != nil {
		return partmap.PartitionStats{}, err
	}
	return s.Store.ListPartitions(ctx)
}

// docServer is a real server over a real Pebble store, configured as
// `partmap serve` configures its http.Server where it matters here.
type docServer struct {
	*httptest.Server
	api   *pmhttp.Server
	store *faultStore
}

func newDocServer(t *testing.T, tokens *auth.Tokens, readTimeout time.Duration) *docServer {
	t.Helper()
	return newDocServerWith(t, tokens, readTimeout, failFast())
}

// newDocServerWith is newDocServer over a store opened with opts.
func newDocServerWith(t *testing.T, tokens *auth.Tokens, readTimeout time.Duration, opts *pebble.Options) *docServer {
	t.Helper()
	fs := &faultStore{Store: newStore(t, opts)}
	api := pmhttp.NewServer(fs, &pmhttp.ServerOptions{Tokens: tokens, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewUnstartedServer(api)
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Config.ReadTimeout = readTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	return &docServer{srv, api, fs}
}

// plainStore has partmap.Store's methods and no other: a store that is
// not a partmap.Backuper, as a Redis store is not.
type plainStore struct{ partmap.Store }

// newPlainDocServer serves a real Pebble store as a plainStore.
func newPlainDocServer(t *testing.T) *docServer {
	t.Helper()
	store := newStore(t, failFast())
	api := pmhttp.NewServer(plainStore{store}, &pmhttp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &docServer{srv, api, nil}
}

// tarNames lists a tar archive's entries, failing on a broken archive.
func tarNames(t *testing.T, archive []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("the archive after %q: %v", names, err)
		}
		names = append(names, hdr.Name)
	}
}

// routed reports whether the server has a route for method and path, and
// not only its catch-all.
func (s *docServer) routed(method, path string) bool {
	_, pattern := s.api.Mux().Handler(httptest.NewRequest(method, path, nil))
	return pattern != "/"
}

// docCoverage records what the exchanges exercised.
type docCoverage struct {
	ops   map[string]bool
	codes map[partmap.Code]bool
}

// docChecker sends requests to a server and holds each request and reply to
// the document.
type docChecker struct {
	doc    *openapi3.T
	router routers.Router
	srv    *docServer
	auth   openapi3filter.AuthenticationFunc
	client *http.Client
	cov    *docCoverage
}

// exchange is one request. invalid marks a request that is outside the
// document on purpose: it is not validated, but its reply must match.
type exchange struct {
	method, target string
	header         []string
	body           string
	bodyReader     io.Reader // instead of body, for a body that stalls
	invalid        bool
	// streamFor, if set, reads a reply that does not end (an event
	// stream) for this long, then hangs up and checks its complete events.
	streamFor time.Duration
}

type docReply struct {
	status  int
	header  http.Header
	body    []byte
	trailer http.Header
}

var registerDecoders sync.Once

func newChecker(t *testing.T, srv *docServer, cov *docCoverage) *docChecker {
	t.Helper()
	doc := loadOpenAPI(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	registerDecoders.Do(func() {
		// Media types openapi3filter has no decoder for. JSON Lines is read
		// as the array of its lines, as the document describes it.
		openapi3filter.RegisterBodyDecoder("application/jsonl", decodeJSONLines)
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", decodeJSONLines)
		openapi3filter.RegisterBodyDecoder("text/event-stream", decodeEvents)
		for _, t := range []string{"text/html", "text/css", "text/javascript", "image/svg+xml", "multipart/byteranges"} {
			openapi3filter.RegisterBodyDecoder(t, openapi3filter.PlainBodyDecoder)
		}
		openapi3filter.RegisterBodyDecoder("application/vnd.google.protobuf", openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder("application/x-tar", openapi3filter.FileBodyDecoder)
	})
	return &docChecker{doc: doc, router: router, srv: srv, auth: openapi3filter.NoopAuthenticationFunc,
		client: &http.Client{Timeout: time.Minute}, cov: cov}
}

func decodeJSONLines(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	items := []any{}
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		items = append(items, v)
	}
	return items, nil
}

// decodeEvents reads Server-Sent Events as the array of their events, as
// the document describes them: each as {"id", "event", "data"}, with data
// parsed as JSON. Comments and retry fields are not events.
func decodeEvents(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	events, err := parseEvents(body)
	if err != nil {
		return nil, err
	}
	items := []any{}
	for _, e := range events {
		dec := json.NewDecoder(strings.NewReader(e.data))
		dec.UseNumber()
		var data any
		if err := dec.Decode(&data); err != nil {
			return nil, fmt.Errorf("event %q: data %q: %w", e.id, e.data, err)
		}
		item := map[string]any{"event": e.event, "data": data}
		if e.hasID {
			item["id"] = e.id
		}
		items = append(items, item)
	}
	return items, nil
}

func (x exchange) request(t *testing.T, base string) *http.Request {
	t.Helper()
	body := x.bodyReader
	if body == nil && x.body != "" {
		body = strings.NewReader(x.body)
	}
	req, err := http.NewRequest(x.method, base+x.target, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(x.header); i += 2 {
		req.Header.Add(x.header[i], x.header[i+1])
	}
	return req
}

// expect sends x, checks the request and the reply against the document,
// and checks the status and, for a problem, its code.
func (c *docChecker) expect(t *testing.T, x exchange, status int, code partmap.Code) docReply {
	t.Helper()
	r := c.send(t, x)
	if r.status != status {
		t.Errorf("%s %s: status %d, want %d; body %.300s", x.method, x.target, r.status, status, r.body)
	}
	if code != "" && x.method != http.MethodHead {
		var p struct{ Type string }
		json.Unmarshal(r.body, &p)
		if p.Type != pmhttp.ProblemTypePrefix+string(code) {
			t.Errorf("%s %s: problem %q, want %s", x.method, x.target, p.Type, code)
		}
	}
	return r
}

func (c *docChecker) send(t *testing.T, x exchange) docReply {
	t.Helper()
	ctx := t.Context()
	req := x.request(t, c.srv.URL)
	route, params, routeErr := c.router.FindRoute(req)
	if routeErr == nil && !x.invalid {
		check := x.request(t, c.srv.URL) // validation reads the body
		in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: c.auth, SkipSettingDefaults: true}}
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Errorf("%s %s: the request does not match the document: %v", x.method, x.target, err)
		}
	}
	send := req
	if x.streamFor > 0 {
		ctx, cancel := context.WithTimeout(ctx, x.streamFor)
		defer cancel()
		send = req.WithContext(ctx)
	}
	resp, err := c.client.Do(send)
	if err != nil {
		t.Fatalf("%s %s: %v", x.method, x.target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil && x.streamFor > 0 && send.Context().Err() != nil {
		// Followed for a while: keep the events that arrived whole.
		end := 0
		if i := bytes.LastIndex(body, []byte("\n\n")); i >= 0 {
			end = i + 2
		}
		body, err = body[:end], nil
	}
	if err != nil {
		t.Fatalf("%s %s: reading the reply: %v", x.method, x.target, err)
	}
	if len(resp.Trailer) > 0 && resp.Header.Get("Trailer") == "" {
		// Go's client moves the Trailer header into resp.Trailer; put it
		// back, so that the header is checked as the server sent it.
		resp.Header.Set("Trailer", strings.Join(slices.Sorted(maps.Keys(resp.Trailer)), ", "))
	}
	r := docReply{resp.StatusCode, resp.Header, body, resp.Trailer}

	path := req.URL.Path
	switch {
	case routeErr == nil:
		c.cov.ops[route.Operation.OperationID] = true
	case errors.Is(routeErr, routers.ErrMethodNotAllowed) && answers405(path):
		route = c.outside(req, "MethodNotAllowed", http.StatusMethodNotAllowed)
		var documented []string
		for m := range c.pathItem(path).Operations() {
			documented = append(documented, m)
		}
		allowed := strings.Split(r.header.Get("Allow"), ", ")
		slices.Sort(documented)
		slices.Sort(allowed)
		if !slices.Equal(allowed, documented) {
			t.Errorf("%s %s: Allow %q, but the document has %q", x.method, x.target, allowed, documented)
		}
	default:
		route = c.outside(req, "NoRoute", http.StatusNotFound)
	}
	c.checkReply(t, x, req, route, params, r)
	return r
}

// answers405 reports whether the server answers a method that path does
// not take with 405 (the MethodNotAllowed response) rather than 404: the
// directory's paths and the console's do.
func answers405(path string) bool {
	return strings.HasPrefix(path, pmhttp.BasePath+"/") || path == "/" || strings.HasPrefix(path, "/console/")
}

// pathItem returns the document's path item for a request's path: the one
// of that name, or else the one whose template it fits.
func (c *docChecker) pathItem(path string) *openapi3.PathItem {
	if item := c.doc.Paths.Value(path); item != nil {
		return item
	}
	got := strings.Split(path, "/")
	for p, item := range c.doc.Paths.Map() {
		tmpl := strings.Split(p, "/")
		fits := len(tmpl) == len(got)
		for i := 0; fits && i < len(tmpl); i++ {
			fits = tmpl[i] == got[i] || strings.HasPrefix(tmpl[i], "{") && got[i] != ""
		}
		if fits {
			return item
		}
	}
	return nil
}

// outside is a route for a reply the document gives outside its
// operations: the 405 of a known path and the 404 of an unknown one.
func (c *docChecker) outside(req *http.Request, response string, status int) *routers.Route {
	return &routers.Route{Spec: c.doc, Path: req.URL.Path, Method: req.Method, Operation: &openapi3.Operation{
		OperationID: response,
		Responses:   openapi3.NewResponses(openapi3.WithStatus(status, c.doc.Components.Responses[response])),
	}}
}

// significant are the headers whose presence means something to a client:
// a reply that sends one must be documented to.
var significant = []string{"ETag", "Location", "Allow", "Retry-After", "WWW-Authenticate"}

func (c *docChecker) checkReply(t *testing.T, x exchange, req *http.Request, route *routers.Route, params map[string]string, r docReply) {
	t.Helper()
	where := fmt.Sprintf("%s %s → %d (%s)", x.method, x.target, r.status, route.Operation.OperationID)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.status,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(t.Context(), in); err != nil {
		t.Errorf("%s: the reply does not match the document: %v\nbody: %.500s", where, err, r.body)
	}
	// What openapi3filter leaves out: it skips HEAD and 304 replies, checks
	// only the headers a response declares, and lets a response documented
	// without content have a body.
	rr := route.Operation.Responses.Status(r.status)
	if rr == nil {
		t.Errorf("%s: the document has no such status", where)
		return
	}
	doc := rr.Value
	for name, h := range doc.Headers {
		if h.Value.Required && r.header.Get(name) == "" {
			t.Errorf("%s: no %s header, which the document requires", where, name)
		}
	}
	for _, name := range significant {
		if r.header.Get(name) == "" {
			continue
		}
		declared := false
		for d := range doc.Headers {
			declared = declared || strings.EqualFold(d, name)
		}
		if !declared {
			t.Errorf("%s: sends %s: %s, which the document does not declare", where, name, r.header.Get(name))
		}
	}
	switch {
	case x.method == http.MethodHead && len(r.body) > 0:
		t.Errorf("%s: a HEAD reply has a body", where)
	case len(doc.Content) == 0 && len(r.body) > 0:
		t.Errorf("%s: a body the document does not describe: %.200s", where, r.body)
	case len(doc.Content) > 0 && r.status != http.StatusNotModified && doc.Content.Get(r.header.Get("Content-Type")) == nil:
		t.Errorf("%s: Content-Type %q, which the document does not describe", where, r.header.Get("Content-Type"))
	}
	if strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") && len(r.body) > 0 {
		var p struct{ Type string }
		json.Unmarshal(r.body, &p)
		c.cov.codes[partmap.Code(strings.TrimPrefix(p.Type, pmhttp.ProblemTypePrefix))] = true
	}
}

// Shorthands for exchanges.
func xGet(target string, header ...string) exchange {
	return exchange{method: http.MethodGet, target: target, header: header}
}
func xHead(target string, header ...string) exchange {
	return exchange{method: http.MethodHead, target: target, header: header}
}
func xPost(target, body string, header ...string) exchange {
	return exchange{method: http.MethodPost, target: target, body: body, header: header}
}
func xPut(target, body string, header ...string) exchange {
	return exchange{method: http.MethodPut, target: target, body: body,
		header: append([]string{"Content-Type", "application/json"}, header...)}
}
func xPatch(target, body string, header ...string) exchange {
	return exchange{method: http.MethodPatch, target: target, body: body,
		header: append([]string{"Content-Type", "application/merge-patch+json"}, header...)}
}
func xDelete(target string, header ...string) exchange {
	return exchange{method: http.MethodDelete, target: target, header: header}
}
func xBad(x exchange) exchange { x.invalid = true; return x }

// Every route, on its happy paths and on every error the server can be made
// to give, answers as the document says; so does every request.
func TestOpenAPIMatchesServer(t *testing.T) {
	cov := &docCoverage{ops: map[string]bool{}, codes: map[partmap.Code]bool{}}
	srv := newDocServer(t, nil, 0)
	c := newChecker(t, srv, cov)
	const (
		alice = "alice@example.com"
		bob   = "bob@example.com"
	)
	b := pmhttp.BasePath
	profile := b + "/customer-profile"
	of := func(email string) string { return profile + "?emailAddress=" + email }
	inc := b + "/customer-profile/increment"
	list := b + "/customer-profiles"
	check := b + "/check?partition="
	checks := b + "/checks"
	wholeMap := b + "/whole-map-lock"
	export := b + "/customer-profiles/export"
	partitionOf := func(email string) partmap.Partition { return partmap.PartitionOf(email, partmap.DefaultPartitions) }
	bulk := b + "/customer-profiles/bulk"
	getMany := b + "/customer-profiles/get"
	jsonCT := []string{"Content-Type", "application/json"}
	ndjson := []string{"Content-Type", "application/x-ndjson"}

	// Open routes and the directory before it is started.
	c.expect(t, xGet("/healthz"), 200, "")
	c.expect(t, xHead("/healthz"), 200, "")
	c.expect(t, xGet("/readyz"), 200, "")
	c.expect(t, xHead("/readyz"), 200, "")
	r := c.expect(t, xGet("/openapi.json"), 200, "")
	if file, _ := os.ReadFile("openapi.json"); !bytes.Equal(r.body, file) {
		t.Error("GET /openapi.json does not serve http/openapi.json")
	}
	c.expect(t, xHead("/openapi.json"), 200, "")
	for _, x := range []exchange{
		xGet(of(alice)), xHead(of(alice)), xPut(profile, `{"emailAddress":"`+alice+`"}`),
		xPatch(of(alice), `{"a":"1"}`), xDelete(of(alice)), xPost(inc+"?emailAddress="+alice+"&field=n", ""),
		xGet(list), xHead(list), xGet(list + "?companyName=Acme"), xGet(b + "/partitions"), xHead(b + "/partitions"),
		xGet(check + "1"), xHead(check + "1"), xGet(checks), xHead(checks), xPost(wholeMap+"?seconds=60", ""),
		xGet(export), xHead(export),
		xPost(bulk, `{"emailAddress":"`+alice+`"}`, ndjson...),
		xPost(getMany, `{"emails":["`+alice+`"]}`, jsonCT...),
		xPost(b+"/customer-profile/expire?emailAddress="+alice+"&seconds=1", ""), xGet(b + "/customer-profile/ttl?emailAddress=" + alice),
		xPost(b+"/customer-profile/set-fields?emailAddress="+alice, `{"a":"1"}`, jsonCT...),
	} {
		c.expect(t, x, 409, partmap.ENOTSTARTED)
	}
	c.expect(t, xDelete(wholeMap+"?lease=0123"), 404, partmap.ENOTFOUND)
	c.expect(t, xBad(xPost(b+"/start?now=1", "")), 400, partmap.EINVALID)
	c.expect(t, xPost(b+"/start", ""), 200, "")
	c.expect(t, xPost(b+"/start", ""), 200, "")

	// One profile: create, replace, read, project, conditions.
	r = c.expect(t, xPut(profile, `{"emailAddress":" Alice@Example.COM ","fullName":"Alice","customerTier":"gold","visits":"1"}`), 201, "")
	etag := r.header.Get("ETag")
	c.expect(t, xPut(of(alice), `{"emailAddress":"`+alice+`","fullName":"Alice L.","visits":"1"}`), 200, "")
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`"}`, "If-Match", etag), 412, partmap.EPRECONDITION)
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`"}`, "If-None-Match", "*"), 412, partmap.EPRECONDITION)
	c.expect(t, xPut(profile, `{"emailAddress":"`+bob+`","companyName":"B & Co"}`, "If-None-Match", "*"), 201, "")
	r = c.expect(t, xGet(of("ALICE@example.com")), 200, "")
	etag = r.header.Get("ETag")
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`","fullName":"Alice","visits":"1"}`, "If-Match", `"0000000000000001", `+etag), 200, "")
	etag = c.expect(t, xHead(of(alice)), 200, "").header.Get("ETag")
	c.expect(t, xGet(of(alice)+"&fields=fullName,nickname&field=a,b"), 200, "")
	c.expect(t, xGet(of(alice), "If-None-Match", etag), 304, "")
	c.expect(t, xHead(of(alice), "If-None-Match", "W/"+etag), 304, "")
	c.expect(t, xGet(of(alice)+"&fields=visits", "If-None-Match", "*"), 304, "")
	c.expect(t, xGet(of(alice), "If-None-Match", `"0123456789abcdef"`), 200, "")

	// Patches and increments.
	c.expect(t, xPatch(of(alice), `{"nickname":"Al","customerTier":null}`), 200, "")
	c.expect(t, exchange{method: "PATCH", target: of(alice), body: `{"nickname":"Al"}`,
		header: []string{"Content-Type", "application/json"}}, 200, "")
	c.expect(t, xPatch(of(alice), `{"x":"1"}`, "If-Match", "*"), 200, "")
	c.expect(t, xPatch(of(alice), `{"x":"2"}`, "If-None-Match", "*"), 412, partmap.EPRECONDITION)
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=visits&by=-3", ""), 200, "")
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=fresh", ""), 200, "")
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=visits", "", "If-Match", `"0000000000000001"`), 412, partmap.EPRECONDITION)
	c.expect(t, xPut(profile, `{"emailAddress":"max@example.com","n":"9223372036854775807"}`), 201, "")
	c.expect(t, xPost(inc+"?emailAddress=max@example.com&field=n&by=1", ""), 409, partmap.EOVERFLOW)
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=fullName", ""), 409, partmap.ENOTINTEGER)
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=fullName&by=0.5&float=true", ""), 409, partmap.ENOTFLOAT)
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=visits&by=0.5&float=true", ""), 200, "")
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=emailAddress", ""), 400, partmap.EKEYFIELD)
	c.expect(t, xBad(xPost(inc+"?emailAddress="+alice+"&field=n&by=1.5", "")), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(inc+"?emailAddress="+alice+"&field=%FF", "")), 400, partmap.EINVALIDUTF8)
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field="+strings.Repeat("f", partmap.DefaultLimits.MaxFieldNameBytes+1), ""), 413, partmap.ETOOLARGE)
	c.expect(t, xPost(inc+"?emailAddress=nobody@example.com&field=n", ""), 404, partmap.ENOTFOUND)

	// Expiry and Redis's other hash commands.
	exp := func(route, query string) string {
		return b + "/customer-profile/" + route + "?emailAddress=exp@example.com" + query
	}
	r = c.expect(t, xPost(exp("set-fields", "&seconds=600"), `{"a":"1","b":"2","c":"3"}`, jsonCT...), 201, "")
	expTag := r.header.Get("ETag")
	c.expect(t, xPost(exp("set-fields", "&condition=FXX&keepTTL=true"), `{"a":"4"}`, jsonCT...), 200, "")
	c.expect(t, xPost(exp("set-fields", "&condition=fnx"), `{"a":"4"}`, jsonCT...), 200, "")
	c.expect(t, xPost(exp("set-fields", ""), `{"d":"4"}`, "Content-Type", "application/json", "If-Match", expTag), 412, partmap.EPRECONDITION)
	c.expect(t, xPost(exp("expire", "&fields=a,nope&milliseconds=60000&condition=LT"), ""), 200, "")
	c.expect(t, xPost(exp("expire", "&field=b&at=1"), ""), 200, "")
	c.expect(t, xPost(exp("expire", "&atMilliseconds=4102444800000&condition=nx"), ""), 200, "")
	c.expect(t, xPost(exp("expire", "&fields=a&milliseconds=30000&condition=xx%20LT"), ""), 200, "")
	r = c.expect(t, xGet(exp("ttl", "&fields=a,b,d")), 200, "")
	c.expect(t, xGet(exp("ttl", ""), "If-None-Match", r.header.Get("ETag")), 304, "")
	c.expect(t, xHead(exp("ttl", "&field=a")), 200, "")
	c.expect(t, xPost(exp("persist", "&fields=a,c,nope"), ""), 200, "")
	c.expect(t, xPost(exp("persist", ""), ""), 200, "")
	c.expect(t, xPost(exp("get-expire", "&fields=a,nope&seconds=60"), ""), 200, "")
	c.expect(t, xPost(exp("get-expire", "&fields=a&persist=true"), ""), 200, "")
	c.expect(t, xPost(exp("get-delete", "&fields=c,nope"), ""), 200, "")
	c.expect(t, xPost(exp("set-if-absent", ""), `{"c":"5"}`, jsonCT...), 200, "")
	c.expect(t, xPost(exp("set-if-absent", ""), `{"c":"6"}`, jsonCT...), 200, "")
	c.expect(t, xPost(b+"/customer-profile/set-if-absent?emailAddress=exp2@example.com", `{"c":"6"}`, jsonCT...), 201, "")
	// Its last field taken, a profile is deleted, as Redis deletes an
	// emptied hash: the reply has no profile.
	c.expect(t, xPost(b+"/customer-profile/get-delete?emailAddress=exp2@example.com&fields=c", ""), 200, "")
	c.expect(t, xGet(of("exp2@example.com")), 404, partmap.ENOTFOUND)
	c.expect(t, xPost(b+"/customer-profile/set-fields?emailAddress=exp2@example.com", `{"c":"6"}`, jsonCT...), 201, "")
	c.expect(t, xPost(b+"/customer-profile/set-fields?emailAddress=exp2@example.com&at=1", `{"c":"7"}`, jsonCT...), 200, "")
	c.expect(t, xGet(of("exp2@example.com")), 404, partmap.ENOTFOUND)
	c.expect(t, xPost(b+"/customer-profile/set-fields?emailAddress=exp2@example.com", `{"c":"6"}`, jsonCT...), 201, "")
	c.expect(t, xPost(b+"/customer-profile/expire?emailAddress=exp2@example.com&fields=c&at=1", ""), 200, "")
	c.expect(t, xGet(of("exp2@example.com")), 404, partmap.ENOTFOUND)
	c.expect(t, xPost(exp("expire", "&seconds=1&milliseconds=1"), ""), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(exp("expire", "&seconds=-1"), "")), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(exp("expire", "&fields=a"), "")), 400, partmap.EINVALID)
	c.expect(t, xPost(exp("expire", "&fields=emailAddress&seconds=1"), ""), 400, partmap.EKEYFIELD)
	c.expect(t, xPost(exp("get-delete", "&fields=emailAddress"), ""), 400, partmap.EKEYFIELD)
	c.expect(t, xPost(exp("get-expire", "&fields=a&seconds=1&persist=true"), ""), 400, partmap.EINVALID)
	c.expect(t, xPost(exp("set-fields", "&keepTTL=true&seconds=1"), `{"a":"1"}`, jsonCT...), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(exp("set-fields", ""), `{"a":null}`, jsonCT...)), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(exp("set-fields", ""), `{"a":1}`, jsonCT...)), 400, partmap.ENONSTRING)
	c.expect(t, xBad(xPost(exp("set-fields", ""), `{"a":`, jsonCT...)), 400, partmap.EMALFORMEDJSON)
	c.expect(t, xBad(xPost(exp("set-fields", ""), `{"a":"1"}`, "Content-Type", "text/plain")), 415, partmap.EMEDIATYPE)
	c.expect(t, xPost(exp("set-fields", ""), `{"emailAddress":"x@example.com"}`, jsonCT...), 400, partmap.EKEYFIELD)
	c.expect(t, xBad(xPost(exp("set-if-absent", ""), `{"a":"1","b":"2"}`, jsonCT...)), 400, partmap.EINVALID)
	c.expect(t, xGet(exp("ttl", "&fields=a,a")), 400, partmap.EINVALID)
	c.expect(t, xPost(exp("get-delete", ""), ""), 400, partmap.EINVALID)
	for _, target := range []string{"expire?fields=a&seconds=1", "persist?fields=a", "get-delete?fields=a", "get-expire?fields=a"} {
		c.expect(t, xPost(b+"/customer-profile/"+target+"&emailAddress=nobody@example.com", ""), 404, partmap.ENOTFOUND)
	}
	c.expect(t, xGet(b+"/customer-profile/ttl?emailAddress=nobody@example.com"), 404, partmap.ENOTFOUND)
	c.expect(t, xHead(b+"/customer-profile/ttl?emailAddress=nobody@example.com"), 404, "")
	c.expect(t, xPost(inc+"?emailAddress=exp@example.com&field=n&by=1", "", "If-None-Match", "*"), 412, partmap.EPRECONDITION)
	c.expect(t, xBad(xPost(inc+"?emailAddress=exp@example.com&field=n&float=maybe", "")), 400, partmap.EINVALID)
	c.expect(t, xGet(b+"/customer-profile/expire"), 405, partmap.EMETHOD)
	c.expect(t, xPost(b+"/customer-profile/ttl", ""), 405, partmap.EMETHOD)

	// Renames and transactions.
	rename := b + "/customer-profile/rename"
	tx := func(body string) exchange {
		return xPost(b+"/transactions", body, "Content-Type", "application/json")
	}
	c.expect(t, xPut(profile, `{"emailAddress":"ren@example.com","visits":"1"}`), 201, "")
	c.expect(t, xPost(rename+"?emailAddress=ren@example.com&to=Renamed@example.com", ""), 201, "")
	c.expect(t, xPost(rename+"?emailAddress=ren@example.com&to=x@example.com", ""), 404, partmap.ENOTFOUND)
	c.expect(t, xPost(rename+"?emailAddress=renamed@example.com&to="+bob, ""), 409, partmap.EEXISTS)
	c.expect(t, xPost(rename+"?emailAddress=renamed@example.com&to=RENAMED@example.com", ""), 400, partmap.EINVALID)
	c.expect(t, xPost(rename+"?emailAddress=renamed@example.com&to=y@example.com", "", "If-Match", `"0000000000000001"`), 412, partmap.EPRECONDITION)
	c.expect(t, tx(`{"operations":[{"op":"put","profile":{"emailAddress":"t1@example.com"},"ifNoneMatch":"*"},`+
		`{"op":"increment","emailAddress":"t1@example.com","field":"n","by":2},`+
		`{"op":"patch","emailAddress":"t1@example.com","patch":{"tier":"gold"}},`+
		`{"op":"rename","emailAddress":"t1@example.com","to":"t2@example.com"},`+
		`{"op":"delete","emailAddress":"renamed@example.com","ifMatch":"*"}]}`), 200, "")
	c.expect(t, tx(`{"operations":[{"op":"patch","emailAddress":"t2@example.com","patch":{"a":"b"},"ifMatch":"\"0000000000000001\""}]}`), 412, partmap.EPRECONDITION)
	c.expect(t, tx(`{"operations":[{"op":"setFields","emailAddress":"t3@example.com","set":{"a":"1","b":"2","c":"3"},"condition":"FNX","seconds":60},`+
		`{"op":"expire","emailAddress":"t3@example.com","fields":["a"],"atMilliseconds":1},`+
		`{"op":"expire","emailAddress":"t3@example.com","milliseconds":600000,"condition":"NX"},`+
		`{"op":"expire","emailAddress":"t3@example.com","milliseconds":300000,"condition":"XX LT"},`+
		`{"op":"persist","emailAddress":"t3@example.com","fields":["b"]},`+
		`{"op":"setIfAbsent","emailAddress":"t3@example.com","set":{"d":"4"}},`+
		`{"op":"getExpire","emailAddress":"t3@example.com","fields":["c","a"],"persist":true},`+
		`{"op":"getDelete","emailAddress":"t3@example.com","fields":["d"]},`+
		`{"op":"setFields","emailAddress":"t3@example.com","set":{"c":"5"},"keepTTL":true}]}`), 200, "")
	c.expect(t, xBad(tx(`{"operations":[{"op":"expire","emailAddress":"t3@example.com"}]}`)), 400, partmap.EINVALID)
	c.expect(t, xBad(tx(`{"operations":[{"op":"getDelete","emailAddress":"t3@example.com","fields":["a"],"seconds":1}]}`)), 400, partmap.EINVALID)
	c.expect(t, tx(`{"operations":[{"op":"delete","emailAddress":"nobody@example.com"}]}`), 404, partmap.ENOTFOUND)
	c.expect(t, tx(`{"operations":[{"op":"rename","emailAddress":"t2@example.com","to":"`+bob+`"}]}`), 409, partmap.EEXISTS)
	c.expect(t, tx(`{"operations":[{"op":"increment","emailAddress":"t2@example.com","field":"tier","by":1}]}`), 409, partmap.ENOTINTEGER)
	c.expect(t, xBad(tx(`{"operations":[]}`)), 400, partmap.EINVALID)
	c.expect(t, xBad(tx(`{"operations":[{"op":"delete"}]}`)), 400, partmap.EINVALID)
	c.expect(t, xBad(tx(`{"operations":`)), 400, partmap.EMALFORMEDJSON)

	// Many profiles.
	r = c.expect(t, xGet(list+"?limit=1"), 200, "")
	var page struct{ NextCursor string }
	json.Unmarshal(r.body, &page)
	c.expect(t, xGet(list+"?limit=1000&cursor="+page.NextCursor), 200, "")
	c.expect(t, xHead(list), 200, "")
	c.expect(t, xGet(b+"/partitions"), 200, "")
	c.expect(t, xHead(b+"/partitions"), 200, "")
	c.expect(t, xBad(xGet(list+"?limit=0")), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(list+"?limit=1001")), 400, partmap.EINVALID)
	c.expect(t, xGet(list+"?cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAA"), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(b+"/partitions?verbose=1")), 400, partmap.EINVALID)

	// Searches: conditions on indexed fields, ANDed, with cursors bound to
	// their search.
	c.expect(t, xPut(profile, `{"emailAddress":"carol@example.com","companyName":"Acme","customerTier":"gold"}`), 201, "")
	c.expect(t, xPut(profile, `{"emailAddress":"dave@example.com","companyName":"Acme","customerTier":"gold"}`), 201, "")
	c.expect(t, xPut(profile, `{"emailAddress":"eve@example.com","companyName":"Acme","customerTier":"silver"}`), 201, "")
	search := list + "?companyName=Acme&customerTier=gold"
	r = c.expect(t, xGet(search+"&limit=1"), 200, "")
	var found struct {
		Profiles   []map[string]string
		NextCursor string
	}
	json.Unmarshal(r.body, &found)
	if len(found.Profiles) != 1 || found.NextCursor == "" {
		t.Errorf("search for two conditions, limit 1: %s", r.body)
	}
	cursor := found.NextCursor
	r = c.expect(t, xGet(list+"?customerTier=gold&cursor="+cursor+"&companyName=Acme"), 200, "") // the same search, spelt otherwise
	found.NextCursor = ""
	json.Unmarshal(r.body, &found)
	if len(found.Profiles) != 1 || found.NextCursor != "" || found.Profiles[0]["customerTier"] != "gold" {
		t.Errorf("search for two conditions, second page: %s", r.body)
	}
	c.expect(t, xHead(search), 200, "")
	c.expect(t, xGet(list+"?companyName=B%20%26%20Co"), 200, "")
	c.expect(t, xGet(list+"?companyName=Acme&cursor="+cursor), 400, partmap.EINVALID)
	c.expect(t, xGet(list+"?cursor="+cursor), 400, partmap.EINVALID)
	c.expect(t, xGet(list+"?fullName=Alice"), 400, partmap.EINVALID)
	c.expect(t, xHead(list+"?fullName=Alice"), 400, "")
	c.expect(t, xGet(search+"&customerTier=silver"), 400, partmap.EINVALID)

	// Checks of a partition, by number and by name, and the drift they report.
	carol := partitionOf("carol@example.com")
	r = c.expect(t, xGet(fmt.Sprint(check, int(carol))), 200, "")
	var report struct {
		Partition string
		Profiles  int64
		OK        bool
		Drift     []struct{ Problem string }
	}
	if json.Unmarshal(r.body, &report); report.Partition != carol.String() || report.Profiles < 1 || !report.OK || len(report.Drift) != 0 {
		t.Errorf("check of %s: %s", carol, r.body)
	}
	c.expect(t, xHead(check+carol.String()), 200, "")
	srv.store.driftWith(partmap.IndexDrift{Email: "carol@example.com", Field: "customerTier", Value: "gold", Missing: true},
		partmap.IndexDrift{Email: "ghost@example.com", Field: "#7", Value: "x"})
	r = c.expect(t, xGet(check+carol.String()), 200, "")
	if json.Unmarshal(r.body, &report); report.OK || len(report.Drift) != 2 || report.Drift[0].Problem != "missing" || report.Drift[1].Problem != "stale" {
		t.Errorf("check with drift: %s", r.body)
	}
	srv.store.driftWith()
	c.expect(t, xGet(check+"1000"), 400, partmap.EINVALID)
	c.expect(t, xGet(check+"99999999999"), 400, partmap.EINVALID)
	c.expect(t, xHead(check+"1000"), 400, "")
	c.expect(t, xBad(xGet(check+"partition-")), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(check+"-1")), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(b+"/check")), 400, partmap.EINVALID)
	c.expect(t, xGet(check+"1&partition=2"), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(check+"1&verbose=1")), 400, partmap.EINVALID)

	// Many partitions in one streamed request: a line per partition, in
	// order, and the count in a trailer.
	r = c.expect(t, xGet(checks+"?from=partition-10&to=12"), 200, "")
	if lines := strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n"); len(lines) != 3 ||
		!strings.Contains(lines[0], `"partition":"partition-010"`) || !strings.Contains(lines[2], `"partition":"partition-012"`) ||
		r.trailer.Get("Partmap-Check-Partitions") != "3" {
		t.Errorf("check of partitions 10 to 12: %q %v", r.body, r.trailer)
	}
	c.expect(t, xGet(checks), 200, "")
	c.expect(t, xHead(checks+"?to=5"), 200, "")
	for _, q := range []string{"?from=1000", "?to=1000", "?from=5&to=3", "?from=1&from=2"} {
		c.expect(t, xGet(checks+q), 400, partmap.EINVALID)
	}
	c.expect(t, xHead(checks+"?from=1000"), 400, "")
	if r := c.expect(t, xGet(checks+"?from=278&to=277"), 400, partmap.EINVALID); !bytes.Contains(r.body, []byte("to 277 is before from 278")) {
		t.Errorf("a reversed range: %s", r.body)
	}
	for _, q := range []string{"?from=x", "?to=-1", "?partition=1"} {
		c.expect(t, xBad(xGet(checks+q)), 400, partmap.EINVALID)
	}

	// The whole-map lock: writers and checks meet lock conflicts while it is
	// held, reads go on, and its lease releases it once.
	r = c.expect(t, xPost(wholeMap+"?seconds=60", ""), 200, "")
	var held struct {
		Lease   string
		Expires time.Time
	}
	if err := json.Unmarshal(r.body, &held); err != nil || held.Lease == "" || time.Until(held.Expires) < 50*time.Second || time.Until(held.Expires) > 70*time.Second {
		t.Errorf("whole-map lock: %s", r.body)
	}
	c.expect(t, xPost(wholeMap+"?seconds=1", ""), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xPut(profile, `{"emailAddress":"carol@example.com"}`), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xGet(check+carol.String()), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xGet(checks+"?from=1&to=2"), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xGet(of("carol@example.com")), 200, "")
	c.expect(t, xGet(search), 200, "")
	c.expect(t, xDelete(wholeMap+"?lease="+held.Lease), 204, "")
	c.expect(t, xDelete(wholeMap+"?lease="+held.Lease), 404, partmap.ENOTFOUND)
	c.expect(t, xGet(check+carol.String()), 200, "")
	for _, q := range []string{"", "?seconds=0", "?seconds=3601", "?seconds=1.5", "?seconds=soon", "?seconds=60&for=1"} {
		c.expect(t, xBad(xPost(wholeMap+q, "")), 400, partmap.EINVALID)
	}
	c.expect(t, xPost(wholeMap+"?seconds=60&seconds=60", ""), 400, partmap.EINVALID)
	c.expect(t, xBad(xDelete(wholeMap)), 400, partmap.EINVALID)
	c.expect(t, xDelete(wholeMap+"?lease=a&lease=b"), 400, partmap.EINVALID)

	fields := map[string]string{"emailAddress": "many@example.com"}
	for i := len(fields); i < partmap.DefaultLimits.MaxFields; i++ {
		fields[fmt.Sprintf("f%03d", i)] = "v"
	}
	full, _ := json.Marshal(fields)
	fields["one-too-many"] = "v"
	tooMany, _ := json.Marshal(fields)
	lines := strings.Join([]string{
		`{"emailAddress":"dan@example.com","fullName":"Dan"}`,
		`{"emailAddress":"` + alice + `","fullName":"Alice"}`,
		``,
		`{"emailAddress":"bad"`,
		`{"emailAddress":"erin@example.com","visits":3}`,
		"{\"emailAddress\":\"erin@example.com\",\"fullName\":\"\xff\"}",
		`{"fullName":"nobody"}`,
		`{"emailAddress":"erin@example.com","":"empty name"}`,
		`{"emailAddress":"erin@example.com","big":"` + strings.Repeat("x", partmap.DefaultLimits.MaxFieldValueBytes+1) + `"}`,
		string(tooMany),
	}, "\n") + "\n"
	r = c.expect(t, xBad(xPost(bulk, lines, ndjson...)), 200, "")
	var bulkReply struct {
		Created, Replaced, Failed int
		Results                   []struct {
			Line, Status int
			Problem      *struct {
				Type   string
				Status int
			}
		}
	}
	if err := json.Unmarshal(r.body, &bulkReply); err != nil {
		t.Fatal(err)
	}
	if bulkReply.Created != 1 || bulkReply.Replaced != 1 || bulkReply.Failed != 7 {
		t.Errorf("bulk: %s", r.body)
	}
	bulkCodes := func() {
		for _, res := range bulkReply.Results {
			if p := res.Problem; p != nil {
				if p.Status != res.Status {
					t.Errorf("bulk line %d: status %d, problem status %d", res.Line, res.Status, p.Status)
				}
				cov.codes[partmap.Code(strings.TrimPrefix(p.Type, pmhttp.ProblemTypePrefix))] = true
			}
		}
	}
	bulkCodes()
	c.expect(t, exchange{method: "POST", target: bulk, body: `{"emailAddress":"fay@example.com"}`,
		header: []string{"Content-Type", "application/jsonl"}}, 200, "")
	// A line with deadlines, as an export writes it; the export below
	// streams it back in the same form.
	c.expect(t, exchange{method: "POST", target: bulk, body: `{"profile":{"emailAddress":"gus@example.com","coupon":"X1"},"expires":{"profile":4102444800000,"fields":{"coupon":4102444800000}}}`,
		header: []string{"Content-Type", "application/jsonl"}}, 200, "")
	c.expect(t, xPost(bulk, "", ndjson...), 200, "")
	c.expect(t, xPost(bulk, "\n\n", ndjson...), 200, "")
	c.expect(t, xBad(xPost(bulk, `{"emailAddress":"`+alice+`"}`, "Content-Type", "text/csv")), 415, partmap.EMEDIATYPE)
	c.expect(t, xBad(xPost(bulk+"?atomic=1", `{"emailAddress":"`+alice+`"}`, ndjson...)), 400, partmap.EINVALID)
	var many strings.Builder
	for i := range partmap.MaxBulkProfiles + 1 {
		fmt.Fprintf(&many, `{"emailAddress":"u%d@example.com"}`+"\n", i)
	}
	c.expect(t, xPost(bulk, many.String(), ndjson...), 413, partmap.ETOOLARGE)
	c.expect(t, xBad(xPost(bulk, strings.Repeat("x", pmhttp.MaxBulkBodyBytes+1), ndjson...)), 413, partmap.ETOOLARGE)

	// Batch lookups: whole profiles or projections, null for a missing
	// one, and the whole request refused for one bad item.
	r = c.expect(t, xPost(getMany, `{"emails":["ALICE@example.com","nobody@example.com","`+alice+`"]}`, jsonCT...), 200, "")
	var batch struct {
		Profiles []map[string]any
		ETags    []*string
	}
	if json.Unmarshal(r.body, &batch); len(batch.Profiles) != 3 || batch.Profiles[0]["emailAddress"] != alice || batch.Profiles[1] != nil ||
		batch.ETags[0] == nil || batch.ETags[1] != nil || *batch.ETags[0] != *batch.ETags[2] {
		t.Errorf("batch lookup: %s", r.body)
	}
	if etag := c.expect(t, xHead(of(alice)), 200, "").header.Get("ETag"); batch.ETags[0] == nil || *batch.ETags[0] != etag {
		t.Errorf("batch lookup: ETag %v, the lookup's %s", batch.ETags[0], etag)
	}
	c.expect(t, xPost(getMany, `{"emails":["`+alice+`","nobody@example.com"],"fields":["fullName","nickname"]}`, jsonCT...), 200, "")
	c.expect(t, xBad(xPost(getMany, `{"emails":[]}`, jsonCT...)), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(getMany, `{"fields":["a"]}`, jsonCT...)), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(getMany, `{"emails":["`+alice+`"],"fields":["a","a"]}`, jsonCT...)), 400, partmap.EINVALID)
	c.expect(t, xPost(getMany, `{"emails":["`+alice+`"," "]}`, jsonCT...), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xBad(xPost(getMany, `{"emails":["`+alice+`"],"limit":["1"]}`, jsonCT...)), 400, partmap.EMALFORMEDJSON)
	c.expect(t, xBad(xPost(getMany, `{"emails":"`+alice+`"}`, jsonCT...)), 400, partmap.EMALFORMEDJSON)
	c.expect(t, xPost(getMany, `{"emails":["`+alice+`"],"fields":["\ud800"]}`, jsonCT...), 400, partmap.EINVALIDUTF8)
	c.expect(t, xPost(getMany, `{"emails":["`+strings.Repeat("a", partmap.MaxEmailBytes)+`@x"]}`, jsonCT...), 413, partmap.ETOOLARGE)
	c.expect(t, xBad(xPost(getMany, `{"emails":["`+alice+`"]}`, "Content-Type", "text/plain")), 415, partmap.EMEDIATYPE)
	c.expect(t, xBad(xPost(getMany+"?fields=a", `{"emails":["`+alice+`"]}`, jsonCT...)), 400, partmap.EINVALID)

	// Limits and bad input on one profile.
	c.expect(t, xPut(profile, string(full)), 201, "")
	c.expect(t, xPost(inc+"?emailAddress=many@example.com&field=another", ""), 413, partmap.ETOOMANYFIELDS)
	c.expect(t, xPut(profile, string(tooMany)), 413, partmap.ETOOMANYFIELDS)
	big := strings.Repeat("x", 30<<10)
	c.expect(t, xPatch(of(alice), `{"b1":"`+big+`","b2":"`+big+`","b3":"`+big+`","b4":"`+big+`","b5":"`+big+`"}`), 413, partmap.ETOOLARGE)
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`","big":"`+strings.Repeat("x", partmap.DefaultLimits.MaxFieldValueBytes+1)+`"}`), 413, partmap.ETOOLARGE)
	c.expect(t, xBad(xPut(profile, `{"emailAddress":"`+alice+`","big":"`+strings.Repeat("x", partmap.DefaultLimits.MaxBodyBytes)+`"}`)), 413, partmap.ETOOLARGE)
	long := strings.Repeat("a", partmap.MaxEmailBytes) + "@x"
	c.expect(t, xGet(of(long)), 413, partmap.ETOOLARGE)
	c.expect(t, xHead(of(long)), 413, "")
	c.expect(t, xDelete(of(long)), 413, partmap.ETOOLARGE)
	c.expect(t, xBad(xPut(profile, `{"emailAddress":"`+alice+`",`)), 400, partmap.EMALFORMEDJSON)
	c.expect(t, xBad(xPut(profile, `{"emailAddress":"`+alice+`","n":1}`)), 400, partmap.ENONSTRING)
	c.expect(t, xBad(xPut(profile, "{\"emailAddress\":\""+alice+"\",\"n\":\"\xff\"}")), 400, partmap.EINVALIDUTF8)
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`","n":"\ud800"}`), 400, partmap.EINVALIDUTF8)
	c.expect(t, xPut(profile, `{"emailAddress":"vïctim@example.com"}`), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xBad(xPut(profile, `{"fullName":"x"}`)), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`","":"x"}`), 400, partmap.EINVALID)
	c.expect(t, xPut(of(bob), `{"emailAddress":"`+alice+`"}`), 400, partmap.EKEYFIELD)
	c.expect(t, xBad(xPut(profile, `{"emailAddress":"`+alice+`"}`, "If-Match", "0123")), 400, partmap.EINVALID)
	c.expect(t, xBad(xPut(profile, `{"emailAddress":"`+alice+`"}`, "If-None-Match", etag)), 400, partmap.EINVALID)
	c.expect(t, xBad(exchange{method: "PUT", target: profile, body: `{"emailAddress":"` + alice + `"}`,
		header: []string{"Content-Type", "text/plain"}}), 415, partmap.EMEDIATYPE)
	c.expect(t, xBad(exchange{method: "PUT", target: profile, body: `{"emailAddress":"` + alice + `"}`,
		header: []string{"Content-Type", "application/json; charset=iso-8859-1"}}), 415, partmap.EMEDIATYPE)
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`"}`, "Content-Encoding", "gzip"), 415, partmap.EMEDIATYPE)
	c.expect(t, xBad(xPatch(of(alice), `{"emailAddress":null}`)), 400, partmap.EKEYFIELD)
	c.expect(t, xBad(xPatch(of(alice), `{"n":1}`)), 400, partmap.ENONSTRING)
	c.expect(t, xBad(xPatch(of(alice), `{`)), 400, partmap.EMALFORMEDJSON)
	c.expect(t, xBad(exchange{method: "PATCH", target: of(alice), body: `{"n":"1"}`,
		header: []string{"Content-Type", "text/plain"}}), 415, partmap.EMEDIATYPE)
	c.expect(t, xPatch(of("nobody@example.com"), `{"n":"1"}`), 404, partmap.ENOTFOUND)
	c.expect(t, xBad(xGet(profile)), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xGet(of("%20")), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xBad(xGet(of(alice)+"&emailAddress="+bob)), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xBad(xGet(of(alice)+"&feilds=a")), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(of(alice)+"&fields=%zz")), 400, partmap.EINVALID)
	c.expect(t, xGet(of(alice)+"&fields=a,a"), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(of(alice)+"&field=%FF")), 400, partmap.EINVALIDUTF8)
	c.expect(t, xGet(of(alice), "If-None-Match", "0123"), 400, partmap.EINVALID)
	c.expect(t, xGet(of("nobody@example.com")), 404, partmap.ENOTFOUND)
	c.expect(t, xHead(of("nobody@example.com")), 404, "")
	c.expect(t, xDelete(of(bob), "If-Match", `"0000000000000001"`), 412, partmap.EPRECONDITION)
	c.expect(t, xBad(xDelete(of(bob), "If-Match", "nope")), 400, partmap.EINVALID)
	c.expect(t, xBad(xDelete(profile)), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xDelete(of(bob)), 204, "")
	c.expect(t, xDelete(of(bob)), 404, partmap.ENOTFOUND)

	// Lock conflicts: the partition is held by another writer.
	release := holdPartition(t, srv.store.Store, alice)
	c.expect(t, xPut(profile, `{"emailAddress":"`+alice+`"}`), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xPatch(of(alice), `{"n":"2"}`), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xPost(inc+"?emailAddress="+alice+"&field=visits", ""), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xDelete(of(alice)), 409, partmap.ELOCKCONFLICT)
	c.expect(t, xGet(fmt.Sprint(check, int(partitionOf(alice)))), 409, partmap.ELOCKCONFLICT)
	r = c.expect(t, xPost(bulk, `{"emailAddress":"`+alice+`"}`, ndjson...), 200, "")
	json.Unmarshal(r.body, &bulkReply)
	bulkCodes()
	release()

	// A store that fails.
	srv.store.fail(errors.New("disk on fire"))
	c.expect(t, xGet(of(alice)), 500, partmap.EINTERNAL)
	c.expect(t, xGet(b+"/partitions"), 500, partmap.EINTERNAL)
	c.expect(t, xGet(check+"1"), 500, partmap.EINTERNAL)
	r = c.expect(t, xGet(export), 200, "") // failed after its first profile
	if got := r.trailer.Get(pmhttp.ExportErrorTrailer); got != "internal: Internal error" || r.trailer.Get(pmhttp.ExportCountTrailer) != "" || bytes.Count(r.body, []byte("\n")) != 1 {
		t.Errorf("export that fails midway: trailers %v, body %q", r.trailer, r.body)
	}
	c.expect(t, xGet("/readyz"), 503, partmap.EUNAVAILABLE)
	c.expect(t, xGet("/metrics"), 200, "") // the gauges read NaN
	srv.store.fail(partmap.Errorf(partmap.EUNAVAILABLE, "the store is away"))
	c.expect(t, xGet(of(alice)), 503, partmap.EUNAVAILABLE)
	c.expect(t, xHead(of(alice)), 503, "")
	c.expect(t, xGet(check+"1"), 503, partmap.EUNAVAILABLE)
	srv.store.fail(nil)

	// Outside the operations: another method, another path.
	c.expect(t, xPost(of(alice), ""), 405, partmap.EMETHOD)
	c.expect(t, xGet(b+"/start"), 405, partmap.EMETHOD)
	c.expect(t, xHead(b+"/start"), 405, "")
	c.expect(t, exchange{method: "OPTIONS", target: list}, 405, partmap.EMETHOD)
	c.expect(t, xPut(b+"/partitions", "{}"), 405, partmap.EMETHOD)
	c.expect(t, xGet(inc), 405, partmap.EMETHOD)
	c.expect(t, xGet(bulk), 405, partmap.EMETHOD)
	c.expect(t, xGet(getMany), 405, partmap.EMETHOD)
	c.expect(t, xPost(check+"1", ""), 405, partmap.EMETHOD)
	c.expect(t, xGet(wholeMap), 405, partmap.EMETHOD)
	c.expect(t, xPost(export, ""), 405, partmap.EMETHOD)
	c.expect(t, xPut(wholeMap, "{}"), 405, partmap.EMETHOD)
	c.expect(t, xGet("/nope"), 404, partmap.ENOTFOUND)
	c.expect(t, xGet("/no%20such%20page"), 404, partmap.ENOTFOUND)
	c.expect(t, xGet(profile+"/"), 404, partmap.ENOTFOUND)
	c.expect(t, xPost("/healthz", ""), 404, partmap.ENOTFOUND)
	c.expect(t, xGet("/healthz", "X-Padding", strings.Repeat("x", 80<<10)), 431, "")
	c.expect(t, xGet(of(alice), "X-Padding", strings.Repeat("x", 80<<10)), 431, "")

	// Operations and profiling.
	c.expect(t, xGet("/metrics"), 200, "")
	c.expect(t, xHead("/metrics"), 200, "")
	c.expect(t, xGet("/metrics", "Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"), 200, "")
	c.expect(t, xGet("/debug/pprof/"), 200, "")
	c.expect(t, xGet("/debug/pprof/heap"), 200, "")
	c.expect(t, xGet("/debug/pprof/goroutine?debug=1"), 200, "")
	c.expect(t, xGet("/debug/pprof/nosuch"), 404, "")
	c.expect(t, xBad(xGet("/debug/pprof/allocs?seconds=soon")), 400, "")
	c.expect(t, xGet("/debug/pprof/cmdline"), 200, "")
	c.expect(t, xGet("/debug/pprof/symbol"), 200, "")
	c.expect(t, exchange{method: "POST", target: "/debug/pprof/symbol", body: "0x1",
		header: []string{"Content-Type", "text/plain"}}, 200, "")
	c.expect(t, xGet("/debug/pprof/trace?seconds=0.05"), 200, "")
	c.expect(t, xGet("/debug/pprof/profile?seconds=1"), 200, "")

	// The export: every profile, then the count in a trailer.
	r = c.expect(t, xGet(export), 200, "")
	if !bytes.Contains(r.body, []byte(`{"profile":{"emailAddress":"gus@example.com","coupon":"X1"},"expires":{"profile":4102444800000,"fields":{"coupon":4102444800000}}}`+"\n")) {
		t.Errorf("export without gus@example.com's deadlines: %s", r.body)
	}
	var parts struct{ TotalProfiles int }
	json.Unmarshal(c.expect(t, xGet(b+"/partitions"), 200, "").body, &parts)
	if lines := fmt.Sprint(bytes.Count(r.body, []byte("\n"))); r.trailer.Get(pmhttp.ExportCountTrailer) != lines || lines != fmt.Sprint(parts.TotalProfiles) {
		t.Errorf("export: %s lines, trailers %v, %d profiles", lines, r.trailer, parts.TotalProfiles)
	}
	c.expect(t, xHead(export), 200, "")
	c.expect(t, xBad(xGet(export+"?limit=1")), 400, partmap.EINVALID)

	// The backup: a tar archive whose last entry is its manifest.
	backup := b + "/backup"
	r = c.expect(t, xGet(backup), 200, "")
	if names := tarNames(t, r.body); len(names) < 2 || names[len(names)-1] != partmap.BackupManifest {
		t.Errorf("backup: the archive holds %q; want data files, then %s", names, partmap.BackupManifest)
	}
	c.expect(t, xHead(backup), 200, "")
	c.expect(t, xBad(xGet(backup+"?full=1")), 400, partmap.EINVALID)
	c.expect(t, xPost(backup, ""), 405, partmap.EMETHOD)

	// The console: its page and files, revalidated by ETag, in ranges, and
	// refused for names it does not have and methods it does not take.
	indexTag := c.expect(t, xGet("/"), 200, "").header.Get("ETag")
	c.expect(t, xHead("/"), 200, "")
	c.expect(t, xGet("/", "If-None-Match", indexTag), 304, "")
	c.expect(t, xHead("/", "If-None-Match", indexTag), 304, "")
	c.expect(t, xGet("/", "If-None-Match", `"0123456789abcdef"`), 200, "")
	c.expect(t, xGet("/", "Range", "bytes=0-9"), 206, "")
	c.expect(t, xGet("/", "If-Match", `"0123456789abcdef"`), 412, "")
	c.expect(t, xPost("/", ""), 405, partmap.EMETHOD)
	c.expect(t, exchange{method: "DELETE", target: "/"}, 405, partmap.EMETHOD)
	var files []string
	entries, err := os.ReadDir("console")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "index.html" {
			files = append(files, e.Name())
		}
	}
	var documented []string
	for _, name := range loadOpenAPI(t).Components.Parameters["consoleFile"].Value.Schema.Value.Enum {
		documented = append(documented, name.(string))
	}
	if slices.Sort(documented); !slices.Equal(documented, files) {
		t.Errorf("the document names the console files %q; http/console has %q", documented, files)
	}
	for _, name := range files {
		etag := c.expect(t, xGet("/console/"+name), 200, "").header.Get("ETag")
		c.expect(t, xHead("/console/"+name), 200, "")
		c.expect(t, xGet("/console/"+name, "If-None-Match", etag), 304, "")
		c.expect(t, xHead("/console/"+name, "If-None-Match", `"0123456789abcdef", `+etag), 304, "")
	}
	css := "/console/console.css"
	c.expect(t, xGet(css, "Range", "bytes=0-9"), 206, "")
	c.expect(t, xHead(css, "Range", "bytes=0-9"), 206, "")
	c.expect(t, xGet(css, "Range", "bytes=0-9,20-29"), 206, "")
	c.expect(t, xGet(css, "Range", "bytes=10-19", "If-Range", `"0123456789abcdef"`), 200, "")
	c.expect(t, xGet(css, "Range", "bytes=99999999-"), 416, "")
	c.expect(t, xHead(css, "Range", "bytes=99999999-"), 416, "")
	c.expect(t, xGet(css, "If-Match", `"0123456789abcdef"`), 412, "")
	c.expect(t, xGet(css, "If-Match", "*"), 200, "")
	c.expect(t, xBad(xGet("/console/nope.js")), 404, partmap.ENOTFOUND)
	c.expect(t, xBad(xGet("/console/index.html")), 404, partmap.ENOTFOUND)
	c.expect(t, xBad(xHead("/console/nope.js")), 404, "")
	c.expect(t, xPost(css, ""), 405, partmap.EMETHOD)
	c.expect(t, xGet("/console/"), 404, partmap.ENOTFOUND)
	c.expect(t, xGet("/console/a/b"), 404, partmap.ENOTFOUND)

	// The online resize, once it is routed, on a server of its own: it
	// changes the map's partition count.
	if srv.routed(http.MethodPost, b+"/resize") {
		checkResize(t, newChecker(t, newDocServer(t, nil, 0), cov))
	}

	// Search indexes and searches, on a server of their own.
	checkSearch(t, newChecker(t, newDocServer(t, nil, 0), cov))

	// The change feed, on a server whose clock the test moves.
	checkChanges(t, cov)

	// A store that is neither a partmap.Backuper nor a partmap.Feeder.
	plain := newChecker(t, newPlainDocServer(t), cov)
	plain.expect(t, xGet(b+"/backup"), 501, partmap.EUNSUPPORTED)
	plain.expect(t, xHead(b+"/backup"), 501, "")
	plain.expect(t, xGet(b+"/changes"), 501, partmap.EUNSUPPORTED)
	plain.expect(t, xGet(b+"/changes", "Accept", "text/event-stream"), 501, partmap.EUNSUPPORTED)
	plain.expect(t, xHead(b+"/changes"), 501, "")

	// A body that does not arrive within the read timeout.
	slow := newChecker(t, newDocServer(t, nil, 300*time.Millisecond), cov)
	slow.expect(t, xPost(b+"/start", ""), 200, "")
	for _, x := range []exchange{xPut(profile, ""), xPatch(of(alice), ""), xPost(bulk, "", ndjson...)} {
		pr, pw := io.Pipe()
		go pw.Write([]byte(`{"emailAddress":"slow@example.com","fullName":"`)) // and then nothing
		x.bodyReader, x.invalid = pr, true
		slow.expect(t, x, 408, partmap.ETIMEOUT)
		pw.Close()
	}

	// Tokens: 401 and 403 on every secured operation.
	checkTokens(t, cov)

	for code := range partmap.Codes {
		switch {
		case cov.codes[code]:
		default:
			t.Errorf("no exchange gave %s; add one", code)
		}
	}
	for path, item := range loadOpenAPI(t).Paths.Map() {
		for method, op := range item.Operations() {
			switch {
			case cov.ops[op.OperationID]:
			case slices.Contains(notYetRouted, op.OperationID) && !srv.routed(method, path):
				t.Logf("%s %s (%s) is not routed on this branch yet", method, path, op.OperationID)
			default:
				t.Errorf("no exchange exercised %s %s (%s); add one", method, path, op.OperationID)
			}
		}
	}
}

// checkChanges drives the change feed through its replies: pages, filters,
// long polls, event streams and their heads, every way to be refused, a
// store that fails, and a cursor the feed's retention has passed. Its
// server's clock can be moved ahead, past the feed's retention of an hour.
func checkChanges(t *testing.T, cov *docCoverage) {
	t.Helper()
	var ahead atomic.Int64
	srv := newDocServerWith(t, nil, 0, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1,
		Clock:         func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) },
		FeedRetention: &partmap.Retention{Age: time.Hour},
	}})
	c := newChecker(t, srv, cov)
	b := pmhttp.BasePath
	changes := b + "/changes"
	sse := []string{"Accept", "text/event-stream"}
	jsonCT := []string{"Content-Type", "application/json"}
	stream := func(target string, header ...string) exchange {
		return exchange{method: http.MethodGet, target: target, header: append(slices.Clone(sse), header...), streamFor: 300 * time.Millisecond}
	}
	type page struct {
		Changes []struct {
			Cursor, Op, EmailAddress, ETag string
			Profile                        map[string]string
			Expires                        *struct {
				Profile int64
				Fields  map[string]int64
			}
		}
		Next string
	}
	read := func(x exchange) page {
		t.Helper()
		var p page
		if err := json.Unmarshal(c.expect(t, x, 200, "").body, &p); err != nil {
			t.Fatalf("%s: %v", x.target, err)
		}
		return p
	}

	c.expect(t, xGet(changes), 409, partmap.ENOTSTARTED)
	c.expect(t, xHead(changes), 409, "")
	c.expect(t, xGet(changes, sse...), 409, partmap.ENOTSTARTED)
	c.expect(t, xPost(b+"/start", ""), 200, "")
	if p := read(xGet(changes)); len(p.Changes) != 0 || p.Next == "" {
		t.Errorf("an empty feed: %+v", p)
	}
	now := read(xGet(changes + "?after=now")).Next

	// Every kind of write shows: with its profile, ETag and deadlines, or
	// as a deletion with neither.
	profile := b + "/customer-profile"
	c.expect(t, xPut(profile, `{"emailAddress":"Feed@Example.com","fullName":"Feed"}`), 201, "")
	c.expect(t, xPost(b+"/customer-profile/set-fields?emailAddress=feed@example.com&seconds=600", `{"a":"1"}`, jsonCT...), 200, "")
	c.expect(t, xPost(b+"/customer-profile/expire?emailAddress=feed@example.com&seconds=900", ""), 200, "")
	c.expect(t, xPatch(profile+"?emailAddress=feed@example.com", `{"n":"1"}`), 200, "")
	c.expect(t, xPost(b+"/customer-profile/increment?emailAddress=feed@example.com&field=n", ""), 200, "")
	c.expect(t, xPost(b+"/customer-profile/rename?emailAddress=feed@example.com&to=fed@example.com", ""), 201, "")
	c.expect(t, xPost(b+"/customer-profiles/bulk", `{"emailAddress":"bulk@example.com"}`, "Content-Type", "application/jsonl"), 200, "")
	c.expect(t, xPost(b+"/transactions", `{"operations":[{"op":"put","profile":{"emailAddress":"tx@example.com"}},`+
		`{"op":"setIfAbsent","emailAddress":"tx@example.com","set":{"a":"1"}}]}`, jsonCT...), 200, "")
	c.expect(t, xDelete(profile+"?emailAddress=fed@example.com"), 204, "")
	all := read(xGet(changes + "?after=" + now))
	var ops []string
	for _, ch := range all.Changes {
		ops = append(ops, ch.Op+" "+ch.EmailAddress)
		switch deleted := ch.Profile == nil; {
		case deleted && ch.ETag != "":
			t.Errorf("a deletion with an ETag: %+v", ch)
		case !deleted && (ch.ETag == "" || ch.Profile["emailAddress"] != ch.EmailAddress):
			t.Errorf("a change without its ETag or profile: %+v", ch)
		}
	}
	want := []string{"put feed@example.com", "setFields feed@example.com", "expire feed@example.com", "patch feed@example.com",
		"increment feed@example.com", "rename feed@example.com", "rename fed@example.com", "put bulk@example.com",
		"setIfAbsent tx@example.com", "delete fed@example.com"}
	if !slices.Equal(ops, want) {
		t.Errorf("the feed holds %q, want %q", ops, want)
	} else if e := all.Changes[2].Expires; e == nil || e.Profile == 0 || e.Fields["a"] == 0 || all.Changes[0].Expires != nil {
		t.Errorf("the deadlines in the feed: %+v, %+v", all.Changes[0].Expires, e)
	}

	// Pages, filters, long polls, heads.
	first := read(xGet(changes + "?after=" + now + "&limit=2"))
	if len(first.Changes) != 2 || first.Next != first.Changes[1].Cursor {
		t.Errorf("a page of 2: %+v", first)
	}
	read(xGet(changes + "?after=" + first.Next + "&limit=10000"))
	if p := read(xGet(changes + "?after=" + now + "&emailAddress=%20FED@example.COM")); len(p.Changes) != 2 {
		t.Errorf("the changes of fed@example.com: %+v", p)
	}
	read(xGet(changes + "?from=partition-0&to=500"))
	read(xGet(changes + "?from=500&wait=0"))
	if p := read(xGet(changes + "?after=" + all.Next + "&wait=50ms")); len(p.Changes) != 0 || p.Next != all.Next {
		t.Errorf("a long poll that nothing ended: %+v", p)
	}
	read(xGet(changes + "?after=now&wait=1"))
	began := time.Now()
	c.expect(t, xHead(changes+"?after=now&wait=5m"), 200, "")
	c.expect(t, xHead(changes+"?after=now", sse...), 200, "")
	if time.Since(began) > 30*time.Second {
		t.Errorf("the heads took %s: a HEAD waited", time.Since(began))
	}

	// Event streams: changes with their cursors as ids, resumed from
	// Last-Event-ID; an idle one sends a comment.
	r := c.expect(t, stream(changes+"?after="+now), 200, "")
	events, _ := parseEvents(bytes.NewReader(r.body))
	if len(events) != len(all.Changes) || events[0].id != all.Changes[0].Cursor || events[0].event != "change" {
		t.Errorf("the stream: %d events, the first %+v; want %d", len(events), events[0], len(all.Changes))
	}
	r = c.expect(t, stream(changes+"?after="+now, "Last-Event-ID", all.Changes[7].Cursor), 200, "")
	if events, _ := parseEvents(bytes.NewReader(r.body)); len(events) != 2 || events[0].id != all.Changes[8].Cursor {
		t.Errorf("the stream resumed after the 8th change: %+v", events)
	}
	if r := c.expect(t, stream(changes+"?after=now"), 200, ""); !bytes.HasPrefix(r.body, []byte(": ")) {
		t.Errorf("an idle stream: %q", r.body)
	}
	c.expect(t, stream(changes+"?emailAddress=tx@example.com&limit=1"), 200, "")

	// Refusals.
	for _, q := range []string{"?limit=0", "?limit=10001", "?limit=x", "?from=x", "?to=-1", "?emailAddress=", "?since=now"} {
		r := c.send(t, xBad(xGet(changes+q)))
		if r.status != 400 {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	for _, q := range []string{"?wait=1x", "?wait=6m", "?wait=-1s", "?after=nope", "?after=99999999999999999", "?after=1&after=2",
		"?from=1000", "?from=5&to=3", "?to=1001", "?emailAddress=a@example.com&from=1", "?limit=1&limit=2"} {
		c.expect(t, xGet(changes+q), 400, partmap.EINVALID)
	}
	c.expect(t, xGet(changes+"?after=nope", sse...), 400, partmap.EINVALID)
	c.expect(t, xHead(changes+"?wait=1x"), 400, "")
	c.expect(t, xGet(changes+"?emailAddress=%20"), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xGet(changes+"?emailAddress=v%C3%AFctim@example.com"), 400, partmap.EINVALIDEMAIL)
	c.expect(t, xGet(changes+"?emailAddress="+strings.Repeat("a", partmap.MaxEmailBytes)+"@x"), 413, partmap.ETOOLARGE)
	c.expect(t, xPost(changes, ""), 405, partmap.EMETHOD)
	c.expect(t, xDelete(changes), 405, partmap.EMETHOD)

	// A store that fails: a long poll is a problem reply; a stream that has
	// started ends with an "error" event.
	srv.store.fail(errors.New("disk on fire"))
	c.expect(t, xGet(changes+"?after=now&wait=1s"), 500, partmap.EINTERNAL)
	r = c.expect(t, stream(changes+"?after=now"), 200, "")
	if events, _ := parseEvents(bytes.NewReader(r.body)); len(events) != 1 || events[0].event != "error" ||
		!strings.Contains(events[0].data, `"type":"urn:partmap:problem:internal"`) || strings.Contains(events[0].data, "fire") {
		t.Errorf("a stream whose store fails: %q", r.body)
	}
	srv.store.fail(partmap.Errorf(partmap.EUNAVAILABLE, "the store is away"))
	c.expect(t, xGet(changes+"?after=now&wait=1s"), 503, partmap.EUNAVAILABLE)
	srv.store.fail(nil)

	// A cursor the retention has passed: 410, to a page, a head and a
	// stream alike, before any stream starts.
	ahead.Store(int64(2 * time.Hour))
	if _, err := srv.store.Store.TrimFeed(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.expect(t, xGet(changes+"?after="+now), 410, partmap.ECURSOREXPIRED)
	c.expect(t, xHead(changes+"?after="+now), 410, "")
	c.expect(t, xGet(changes+"?after="+now, sse...), 410, partmap.ECURSOREXPIRED)
	c.expect(t, xGet(changes+"?after=now", "Accept", "text/event-stream", "Last-Event-ID", all.Changes[0].Cursor), 410, partmap.ECURSOREXPIRED)
	if p := read(xGet(changes)); len(p.Changes) != 0 {
		t.Errorf("the feed after a trim past everything: %+v", p)
	}
	read(xGet(changes + "?after=" + all.Next))
}

// checkResize drives the online resize through its replies: refused before
// the directory is started and for a count out of range or the current one,
// then started, followed to its end and refused as the same resize again.
func checkResize(t *testing.T, c *docChecker) {
	t.Helper()
	b := pmhttp.BasePath
	resize := b + "/resize"
	c.expect(t, xPost(resize+"?partitions=2000", ""), 409, partmap.ENOTSTARTED)
	c.expect(t, xPost(b+"/start", ""), 200, "")
	for i := range 100 {
		c.expect(t, xPut(b+"/customer-profile", fmt.Sprintf(`{"emailAddress":"r%d@example.com","companyName":"Acme"}`, i)), 201, "")
	}
	c.expect(t, xGet(resize), 200, "")
	c.expect(t, xHead(resize), 200, "")
	c.expect(t, xPost(resize+"?partitions=1000", ""), 400, partmap.EINVALID) // the current count
	for _, q := range []string{"", "?partitions=0", "?partitions=1048577", "?partitions=many", "?partitions=2000&now=1"} {
		c.expect(t, xBad(xPost(resize+q, "")), 400, partmap.EINVALID)
	}
	c.expect(t, xPost(resize+"?partitions=2000&partitions=2000", ""), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(resize+"?verbose=1")), 400, partmap.EINVALID)
	c.expect(t, xPut(resize, "{}"), 405, partmap.EMETHOD)

	// Held, the whole-map lock keeps a resize from finishing: meanwhile the
	// same count resumes it and another is a conflict. A resize that ended
	// before the lock was taken is tried again, to another count.
	target := 1500
	for try := 0; ; try++ {
		c.expect(t, xPost(resize+fmt.Sprintf("?partitions=%d", target), ""), 202, "")
		var lock struct{ Lease string }
		json.Unmarshal(c.expect(t, xPost(b+"/whole-map-lock?seconds=60", ""), 200, "").body, &lock)
		var st struct{ State string }
		json.Unmarshal(c.expect(t, xGet(resize), 200, "").body, &st)
		if st.State == "running" {
			c.expect(t, xPost(resize+fmt.Sprintf("?partitions=%d", target), ""), 202, "")
			c.expect(t, xPost(resize+fmt.Sprintf("?partitions=%d", target+500), ""), 409, partmap.ECONFLICT)
			c.expect(t, xDelete(b+"/whole-map-lock?lease="+lock.Lease), 204, "")
			break
		}
		c.expect(t, xDelete(b+"/whole-map-lock?lease="+lock.Lease), 204, "")
		if try == 10 {
			t.Fatal("every resize ended before the whole-map lock was taken")
		}
		target += 500
	}
	var status struct {
		State      string
		Partitions int
	}
	for deadline := time.Now().Add(time.Minute); status.State != "idle" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		json.Unmarshal(c.expect(t, xGet(resize), 200, "").body, &status)
	}
	if status.State != "idle" || status.Partitions != target {
		t.Errorf("the resize to %d did not end: %+v", target, status)
	}
	c.expect(t, xPost(resize+fmt.Sprintf("?partitions=%d", target), ""), 400, partmap.EINVALID) // the current count now
}

// checkSearch drives the search indexes through their replies: before the
// directory is started, while an index builds, on every page of a search,
// and on every way to be refused.
func checkSearch(t *testing.T, c *docChecker) {
	t.Helper()
	b := pmhttp.BasePath
	ix := b + "/indexes"
	search := func(index, query string) string { return ix + "/" + index + "/search?query=" + url.QueryEscape(query) }
	jsonCT := []string{"Content-Type", "application/json"}
	desk := `{"name":"desk","fields":[{"name":"fullName","type":"TEXT"},{"name":"notes","type":"TEXT","noStem":true},` +
		`{"name":"customerTier","type":"TAG","separator":";"},{"name":"visits","type":"NUMERIC","sortable":true}],"stopwords":[]}`

	// Before the start, indexes can be listed, created and dropped, but
	// not searched.
	c.expect(t, xGet(ix), 200, "")
	c.expect(t, xHead(ix), 200, "")
	c.expect(t, xPost(ix, desk, jsonCT...), 201, "")
	c.expect(t, xGet(search("desk", "*")), 409, partmap.ENOTSTARTED)
	c.expect(t, xHead(search("desk", "*")), 409, "")
	c.expect(t, xPost(b+"/start", ""), 200, "")
	for _, p := range []string{
		`{"emailAddress":"alice@example.com","fullName":"Alice Liddell","customerTier":"gold;vip","visits":"12"}`,
		`{"emailAddress":"bob@example.com","fullName":"Bob Alison","customerTier":"silver","visits":"3","notes":"running late"}`,
		`{"emailAddress":"carol@example.com","fullName":"Carol Alinsky","customerTier":"gold"}`,
	} {
		c.expect(t, xPut(b+"/customer-profile", p), 201, "")
	}
	waitIndex(t, c, "desk")

	// Pages: a sorted search a hit at a time, by its cursor, with the total
	// on each page.
	type searchPage struct {
		Total int
		Hits  []struct {
			EmailAddress string
			Fields       map[string]string
		}
		NextCursor *string
	}
	var page searchPage
	read := func(target string) {
		t.Helper()
		page = searchPage{}
		if err := json.Unmarshal(c.expect(t, xGet(target), 200, "").body, &page); err != nil {
			t.Fatalf("%s: %v", target, err)
		}
	}
	sorted := search("desk", "ali*") + "&sortBy=visits&order=desc"
	var got []string
	cursor := "" // the first page's
	for target := sorted + "&limit=1"; ; {
		read(target)
		if page.Total != 3 || len(page.Hits) != 1 {
			t.Fatalf("%s: %+v", target, page)
		}
		got = append(got, page.Hits[0].EmailAddress)
		if page.NextCursor == nil {
			break
		}
		cursor = cmp.Or(cursor, *page.NextCursor)
		target = sorted + "&limit=1&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	if want := []string{"alice@example.com", "bob@example.com", "carol@example.com"}; !slices.Equal(got, want) {
		t.Errorf("paged by visits, descending: %v, want %v", got, want)
	}
	c.expect(t, xHead(sorted), 200, "")
	read(search("desk", "@customerTier:{gold} -@notes:late") + "&return=fullName,nickname")
	if len(page.Hits) != 2 || !maps.Equal(page.Hits[0].Fields, map[string]string{"fullName": "Alice Liddell"}) {
		t.Errorf("RETURN fullName nickname: %+v", page)
	}
	read(search("desk", "@visits:[(3 +inf]") + "&return=")
	if len(page.Hits) != 1 || page.Hits[0].Fields == nil || len(page.Hits[0].Fields) != 0 {
		t.Errorf("RETURN 0: %+v", page)
	}
	read(search("desk", "@fullName:(alice|bob)") + "&noContent=true&offset=1&limit=5")
	if page.Total != 2 || len(page.Hits) != 1 || page.Hits[0].Fields != nil {
		t.Errorf("NOCONTENT LIMIT 1 5: %+v", page)
	}
	read(search("desk", "running") + "&limit=0")
	if page.Total != 1 || len(page.Hits) != 0 {
		t.Errorf("LIMIT 0 0: %+v", page)
	}
	c.expect(t, xGet(search("profiles", "@customerTier:{gold}")+"&noContent=false"), 200, "")

	// Searches refused.
	c.expect(t, xGet(search("desk", "(ali")), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "@nope:{x}")), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "a*")), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(search("desk", ""))), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "*")+"&sortBy=nope"), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "*")+"&order=desc"), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "*")+"&offset=999999&limit=10"), 400, partmap.EINVALID)
	c.expect(t, xGet(sorted+"&offset=1&cursor="+url.QueryEscape(cursor)), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "ali*")+"&cursor="+url.QueryEscape(cursor)), 400, partmap.EINVALID) // another order
	c.expect(t, xGet(search("desk", "*")+"&return=a,a"), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "*")+"&return=a,,b"), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "*")+"&return=a&noContent=true"), 400, partmap.EINVALID)
	c.expect(t, xGet(search("desk", "*")+"&query=*"), 400, partmap.EINVALID)
	c.expect(t, xHead(search("desk", "(")), 400, "")
	c.expect(t, xBad(xGet(search("desk", "*")+"&return=%FF")), 400, partmap.EINVALIDUTF8)
	for _, q := range []string{"&limit=10001", "&limit=-1", "&limit=ten", "&offset=-1", "&order=up&sortBy=visits", "&noContent=yes", "&sort=visits"} {
		c.expect(t, xBad(xGet(search("desk", "*")+q)), 400, partmap.EINVALID)
	}
	c.expect(t, xBad(xGet(ix+"/desk/search")), 400, partmap.EINVALID)
	c.expect(t, xBad(xGet(ix+"?verbose=1")), 400, partmap.EINVALID)
	c.expect(t, xGet(search("nope", "*")), 404, partmap.ENOTFOUND)
	c.expect(t, xHead(search("nope", "*")), 404, "")

	// Creations refused; none creates anything.
	c.expect(t, xPost(ix, desk, jsonCT...), 409, partmap.EEXISTS)
	c.expect(t, xPost(ix, `{"name":"profiles","fields":[{"name":"a","type":"TAG"}]}`, jsonCT...), 400, partmap.EINVALID)
	c.expect(t, xPost(ix, `{"name":"two","fields":[{"name":"a","type":"TAG"},{"name":"a","type":"TEXT"}]}`, jsonCT...), 400, partmap.EINVALID)
	c.expect(t, xPost(ix, `{"name":"two","fields":[{"name":"a","type":"NUMERIC","noStem":true}]}`, jsonCT...), 400, partmap.EINVALID)
	c.expect(t, xPost(ix, `{"name":"white space","fields":[{"name":"a","type":"TAG"}]}`, jsonCT...), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(ix, `{"name":"two","fields":[]}`, jsonCT...)), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(ix, `{"name":"two","fields":[{"name":"a","type":"GEO"}]}`, jsonCT...)), 400, partmap.EINVALID)
	c.expect(t, xBad(xPost(ix, `{"name":"two","fields":[{"name":"a","type":"TAG"}],"on":"HASH"}`, jsonCT...)), 400, partmap.EMALFORMEDJSON)
	c.expect(t, xBad(xPost(ix, `{"name":"two","fields":[{"name":"a","type":"TAG"}]} {}`, jsonCT...)), 400, partmap.EMALFORMEDJSON)
	c.expect(t, xBad(xPost(ix, "{\"name\":\"\xff\",\"fields\":[{\"name\":\"a\",\"type\":\"TAG\"}]}", jsonCT...)), 400, partmap.EINVALIDUTF8)
	c.expect(t, xBad(xPost(ix, `{"name":"two","fields":[{"name":"a","type":"TAG"}]}`, "Content-Type", "text/plain")), 415, partmap.EMEDIATYPE)
	big := `{"name":"two","fields":[{"name":"a","type":"TEXT"}],"stopwords":["` + strings.Repeat("x", partmap.DefaultLimits.MaxBodyBytes) + `"]}`
	c.expect(t, xPost(ix, big, jsonCT...), 413, partmap.ETOOLARGE)
	c.expect(t, xBad(xPost(ix+"?name=two", `{"name":"two","fields":[{"name":"a","type":"TAG"}]}`, jsonCT...)), 400, partmap.EINVALID)
	var list struct{ Indexes []struct{ Name string } }
	json.Unmarshal(c.expect(t, xGet(ix), 200, "").body, &list)
	if len(list.Indexes) != 2 || list.Indexes[0].Name != "profiles" || list.Indexes[1].Name != "desk" {
		t.Errorf("after the refused creations: %+v", list)
	}

	// An index that is still being built answers no searches: one of its
	// partitions is held.
	release := holdPartition(t, c.srv.store.Store, "carol@example.com")
	c.expect(t, xPost(ix, `{"name":"late","fields":[{"name":"fullName","type":"TEXT"}]}`, jsonCT...), 201, "")
	var building struct {
		Indexes []struct {
			Name     string
			Building bool
			Progress float64
		}
	}
	json.Unmarshal(c.expect(t, xGet(ix), 200, "").body, &building)
	if late := building.Indexes[len(building.Indexes)-1]; late.Name != "late" || !late.Building || late.Progress >= 1 {
		t.Errorf("an index whose build is held: %+v", building)
	}
	c.expect(t, xGet(search("late", "ali*")), 503, partmap.EUNAVAILABLE)
	c.expect(t, xHead(search("late", "ali*")), 503, "")
	release()
	waitIndex(t, c, "late")

	// Drops.
	c.expect(t, xDelete(ix+"/late"), 200, "")
	c.expect(t, xDelete(ix+"/late"), 404, partmap.ENOTFOUND)
	c.expect(t, xGet(search("late", "*")), 404, partmap.ENOTFOUND)
	c.expect(t, xDelete(ix+"/profiles"), 400, partmap.EINVALID)
	c.expect(t, xBad(xDelete(ix+"/desk?dd=1")), 400, partmap.EINVALID)

	// Other methods.
	c.expect(t, xPut(ix, "{}"), 405, partmap.EMETHOD)
	c.expect(t, xGet(ix+"/desk"), 405, partmap.EMETHOD)
	c.expect(t, xPost(ix+"/desk/search", ""), 405, partmap.EMETHOD)
}

// waitIndex waits until an index answers searches.
func waitIndex(t *testing.T, c *docChecker, name string) {
	t.Helper()
	target := pmhttp.BasePath + "/indexes/" + name + "/search?query=*&limit=0"
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		r := c.send(t, xGet(target))
		if r.status == 200 {
			return
		}
		if r.status != 503 || time.Now().After(deadline) {
			t.Fatalf("index %s: %d %s", name, r.status, r.body)
		}
	}
}

// checkTokens sends every operation, on a server with tokens, without a
// token, with one it does not know, with each scope below the one the
// document names, and with that scope. The first ones must be 401 and 403,
// the last not; each reply must match the document.
func checkTokens(t *testing.T, cov *docCoverage) {
	scopes := []auth.Scope{auth.ScopeRead, auth.ScopeWrite, auth.ScopeAdmin}
	byScope, parsed := newTokens(t, scopes...)
	tokens := map[string]string{} // by the scope's name, as the document gives it
	for scope, tok := range byScope {
		tokens[scope.String()] = tok
	}
	srv := newDocServer(t, parsed, 0)
	c := newChecker(t, srv, cov)
	c.auth = func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		scheme, tok, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return errors.New("no bearer token")
		}
		return nil
	}
	b := pmhttp.BasePath
	c.expect(t, exchange{method: "POST", target: b + "/start", header: bearer(tokens["admin"])}, 200, "")

	// A request for each operation, one the document takes.
	jsonCT := []string{"Content-Type", "application/json"}
	samples := map[string]exchange{
		"startDirectory":     {target: b + "/start"},
		"getProfile":         {target: b + "/customer-profile?emailAddress=a@example.com"},
		"putProfile":         {target: b + "/customer-profile", body: `{"emailAddress":"a@example.com"}`, header: jsonCT},
		"patchProfile":       {target: b + "/customer-profile?emailAddress=a@example.com", body: `{"n":"1"}`, header: jsonCT},
		"deleteProfile":      {target: b + "/customer-profile?emailAddress=nobody@example.com"},
		"incrementField":     {target: b + "/customer-profile/increment?emailAddress=a@example.com&field=n"},
		"renameProfile":      {target: b + "/customer-profile/rename?emailAddress=nobody@example.com&to=b@example.com"},
		"expireProfile":      {target: b + "/customer-profile/expire?emailAddress=nobody@example.com&seconds=1"},
		"persistProfile":     {target: b + "/customer-profile/persist?emailAddress=nobody@example.com"},
		"getDeadlines":       {target: b + "/customer-profile/ttl?emailAddress=nobody@example.com"},
		"setFieldIfAbsent":   {target: b + "/customer-profile/set-if-absent?emailAddress=a@example.com", body: `{"n":"1"}`, header: jsonCT},
		"getDeleteFields":    {target: b + "/customer-profile/get-delete?emailAddress=nobody@example.com&fields=a"},
		"getExpireFields":    {target: b + "/customer-profile/get-expire?emailAddress=nobody@example.com&fields=a"},
		"setFields":          {target: b + "/customer-profile/set-fields?emailAddress=a@example.com", body: `{"n":"1"}`, header: jsonCT},
		"transact":           {target: b + "/transactions", body: `{"operations":[{"op":"delete","emailAddress":"nobody@example.com"}]}`, header: jsonCT},
		"getChanges":         {target: b + "/changes"},
		"listProfiles":       {target: b + "/customer-profiles"},
		"exportProfiles":     {target: b + "/customer-profiles/export"},
		"bulkUpsertProfiles": {target: b + "/customer-profiles/bulk", body: `{"emailAddress":"a@example.com"}`, header: []string{"Content-Type", "application/jsonl"}},
		"getProfiles":        {target: b + "/customer-profiles/get", body: `{"emails":["a@example.com"]}`, header: jsonCT},
		"listPartitions":     {target: b + "/partitions"},
		"checkPartition":     {target: b + "/check?partition=1"},
		"checkPartitions":    {target: b + "/checks?from=1&to=3"},
		"lockWholeMap":       {target: b + "/whole-map-lock?seconds=1"}, // with admin's token, writers wait a second
		"unlockWholeMap":     {target: b + "/whole-map-lock?lease=0123"},
		"resizeMap":          {target: b + "/resize?partitions=1000"}, // the current count: refused, changes nothing
		"getResize":          {target: b + "/resize"},
		"backupStore":        {target: b + "/backup"},
		"listIndexes":        {target: b + "/indexes"},
		"createIndex":        {target: b + "/indexes", body: `{"name":"desk","fields":[{"name":"fullName","type":"TEXT"}]}`, header: jsonCT},
		"dropIndex":          {target: b + "/indexes/nope"},
		"searchIndex":        {target: b + "/indexes/profiles/search?query=*"},
		"getHealth":          {target: "/healthz"},
		"getReadiness":       {target: "/readyz"},
		"getMetrics":         {target: "/metrics"},
		"getOpenAPI":         {target: "/openapi.json"},
		"getConsole":         {target: "/"},
		"getConsoleFile":     {target: "/console/console.js"},
		"pprofIndex":         {target: "/debug/pprof/"},
		"pprofNamedProfile":  {target: "/debug/pprof/heap"},
		"pprofCmdline":       {target: "/debug/pprof/cmdline"},
		"pprofCPU":           {target: "/debug/pprof/profile?seconds=1"},
		"pprofSymbolCount":   {target: "/debug/pprof/symbol"},
		"pprofSymbolLookup":  {target: "/debug/pprof/symbol", body: "0x1", header: []string{"Content-Type", "text/plain"}},
		"pprofTrace":         {target: "/debug/pprof/trace?seconds=0.01"},
	}
	doc := loadOpenAPI(t)
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			x, ok := samples[op.OperationID]
			if !ok && method == http.MethodHead && item.Get != nil {
				x, ok = samples[item.Get.OperationID] // a HEAD asks what its GET asks
			}
			if !ok {
				t.Errorf("%s %s: no sample request for %s; add one", method, path, op.OperationID)
				continue
			}
			x.method = method
			if !srv.routed(method, strings.SplitN(x.target, "?", 2)[0]) {
				continue // not on this branch yet; TestOpenAPIMatchesServer reports it
			}
			need := ""
			for _, req := range *cmp.Or(op.Security, &openapi3.SecurityRequirements{}) {
				for _, s := range req["bearerAuth"] {
					need = s
				}
			}
			with := func(tok string) exchange {
				y := x
				y.header = append(slices.Clone(x.header), bearer(tok)...)
				return y
			}
			if need == "" {
				if r := c.send(t, x); r.status == 401 || r.status == 403 {
					t.Errorf("%s %s is open, but answers %d without a token", method, x.target, r.status)
				}
				continue
			}
			c.expect(t, xBad(x), 401, partmap.EUNAUTHORIZED)
			c.expect(t, xBad(with("pm_not-a-token")), 401, partmap.EUNAUTHORIZED)
			for _, below := range scopes {
				if below.String() == need {
					break
				}
				c.expect(t, with(tokens[below.String()]), 403, partmap.EFORBIDDEN)
			}
			if r := c.send(t, with(tokens[need])); r.status == 401 || r.status == 403 {
				t.Errorf("%s %s: the %s scope the document names is refused: %d %s", method, x.target, need, r.status, r.body)
			}
		}
	}
	c.expect(t, xBad(exchange{method: "GET", target: b + "/partitions", header: []string{"Authorization", "Basic YTpi"}}), 401, partmap.EUNAUTHORIZED)
}
