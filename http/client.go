package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
)

// Client is a partmap.Store backed by a partmap server. It retries lock
// conflicts, which by contract wrote nothing, with bounded exponential
// backoff and full jitter, until RetryFor has passed or the context ends.
type Client struct {
	base      string
	http      *http.Client
	opts      ClientOptions
	conflicts atomic.Uint64
}

var _ partmap.Store = (*Client)(nil)

// ClientOptions configure NewClient. A nil *ClientOptions means defaults.
type ClientOptions struct {
	HTTPClient *http.Client  // nil means a client with keep-alive and no overall timeout
	Token      string        // bearer token sent with every request, if set
	RetryFor   time.Duration // how long to keep retrying lock conflicts; 0 means 30s, <0 never retries
	RetryBase  time.Duration // first backoff; 0 means 2ms
	RetryMax   time.Duration // backoff cap; 0 means 500ms
}

// NewClient returns a client for the server at baseURL, such as
// http://127.0.0.1:8080.
func NewClient(baseURL string, opts *ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server address %q is not an http:// or https:// URL", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/") + BasePath}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256 // many goroutines share one client
		c.opts.HTTPClient = &http.Client{Transport: t}
	}
	c.http = c.opts.HTTPClient
	if c.opts.RetryFor == 0 {
		c.opts.RetryFor = 30 * time.Second
	}
	if c.opts.RetryBase == 0 {
		c.opts.RetryBase = 2 * time.Millisecond
	}
	if c.opts.RetryMax == 0 {
		c.opts.RetryMax = 500 * time.Millisecond
	}
	return c, nil
}

// LockConflicts counts the lock conflicts this client has met, retried or not.
func (c *Client) LockConflicts() uint64 { return c.conflicts.Load() }

func (c *Client) Start(ctx context.Context) (bool, error) {
	var out struct {
		AlreadyStarted bool `json:"alreadyStarted"`
	}
	_, err := c.do(ctx, request{method: "POST", path: "/start"}, &out)
	return !out.AlreadyStarted && err == nil, err
}

func (c *Client) FindProfile(ctx context.Context, email string) (partmap.Record, error) {
	var rec partmap.Record
	resp, err := c.do(ctx, request{method: "GET", path: "/customer-profile", query: emailValues(email)}, &rec.Profile)
	if err != nil {
		return partmap.Record{}, err
	}
	rec.Version, err = etagOf(resp)
	return rec, err
}

func (c *Client) UpsertProfile(ctx context.Context, p partmap.Profile, cond partmap.Condition) (partmap.Record, bool, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return partmap.Record{}, false, err
	}
	var rec partmap.Record
	resp, err := c.do(ctx, request{method: "PUT", path: "/customer-profile", body: body, cond: cond}, &rec.Profile)
	if err != nil {
		return partmap.Record{}, false, err
	}
	rec.Version, err = etagOf(resp)
	return rec, resp.StatusCode == http.StatusCreated, err
}

func (c *Client) ProjectProfile(ctx context.Context, email string, fields []string) (partmap.Projection, error) {
	if len(fields) == 0 {
		return partmap.Projection{}, partmap.Errorf(partmap.EINVALID, "name at least one field")
	}
	// field=NAME, repeated, carries any name, commas included.
	q := emailValues(email)
	q["field"] = fields
	var proj partmap.Projection
	resp, err := c.do(ctx, request{method: "GET", path: "/customer-profile", query: q}, &proj)
	if err != nil {
		return partmap.Projection{}, err
	}
	proj.Version, err = etagOf(resp)
	return proj, err
}

func (c *Client) PatchProfile(ctx context.Context, email string, patch partmap.Patch, cond partmap.Condition) (partmap.PatchResult, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return partmap.PatchResult{}, err
	}
	var out struct {
		Profile       partmap.Profile `json:"profile"`
		FieldsAdded   int             `json:"fieldsAdded"`
		FieldsDeleted int             `json:"fieldsDeleted"`
	}
	resp, err := c.do(ctx, request{method: "PATCH", path: "/customer-profile", query: emailValues(email),
		body: body, contentType: "application/merge-patch+json", cond: cond}, &out)
	if err != nil {
		return partmap.PatchResult{}, err
	}
	v, err := etagOf(resp)
	return partmap.PatchResult{Record: partmap.Record{Profile: out.Profile, Version: v},
		FieldsAdded: out.FieldsAdded, FieldsDeleted: out.FieldsDeleted}, err
}

func (c *Client) IncrementField(ctx context.Context, email, field string, by int64, cond partmap.Condition) (partmap.Increment, error) {
	q := emailValues(email)
	q.Set("field", field)
	q.Set("by", strconv.FormatInt(by, 10))
	var out struct {
		Email string `json:"emailAddress"`
		Field string `json:"field"`
		Value string `json:"value"`
	}
	resp, err := c.do(ctx, request{method: "POST", path: "/customer-profile/increment", query: q, cond: cond}, &out)
	if err != nil {
		return partmap.Increment{}, err
	}
	inc := partmap.Increment{Email: out.Email, Field: out.Field}
	if inc.Value, err = strconv.ParseInt(out.Value, 10, 64); err != nil {
		return partmap.Increment{}, fmt.Errorf("server sent a bad counter value %q", out.Value)
	}
	inc.Version, err = etagOf(resp)
	return inc, err
}

func (c *Client) DeleteProfile(ctx context.Context, email string, cond partmap.Condition) error {
	_, err := c.do(ctx, request{method: "DELETE", path: "/customer-profile", query: emailValues(email), cond: cond}, nil)
	return err
}

func (c *Client) ListProfiles(ctx context.Context, opts partmap.ListOptions) (partmap.Page, error) {
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	for _, m := range opts.Where {
		if m.Field == "limit" || m.Field == "cursor" {
			return partmap.Page{}, &partmap.Error{Code: partmap.EINVALID, Field: m.Field,
				Message: fmt.Sprintf("cannot search by %q over HTTP: the name is taken by paging", m.Field)}
		}
		if _, dup := q[m.Field]; dup {
			return partmap.Page{}, &partmap.Error{Code: partmap.EINVALID, Field: m.Field, Message: fmt.Sprintf("%q is named twice; a field holds one value", m.Field)}
		}
		q.Set(m.Field, m.Value)
	}
	var out struct {
		Profiles   []partmap.Profile `json:"profiles"`
		NextCursor *string           `json:"nextCursor"`
	}
	if _, err := c.do(ctx, request{method: "GET", path: "/customer-profiles", query: q}, &out); err != nil {
		return partmap.Page{}, err
	}
	page := partmap.Page{Profiles: make([]partmap.Record, len(out.Profiles))}
	for i, p := range out.Profiles {
		page.Profiles[i] = partmap.Record{Profile: p}
	}
	if out.NextCursor != nil {
		page.NextCursor = *out.NextCursor
	}
	return page, nil
}

func (c *Client) ListPartitions(ctx context.Context) (partmap.PartitionStats, error) {
	var out struct {
		Partitions []struct {
			Name     string `json:"name"`
			Profiles int64  `json:"profiles"`
		} `json:"partitions"`
		TotalProfiles   int64    `json:"totalProfiles"`
		TotalPartitions int      `json:"totalPartitions"`
		Indexes         []string `json:"indexes"`
	}
	if _, err := c.do(ctx, request{method: "GET", path: "/partitions"}, &out); err != nil {
		return partmap.PartitionStats{}, err
	}
	stats := partmap.PartitionStats{TotalProfiles: out.TotalProfiles, TotalPartitions: out.TotalPartitions, Indexes: out.Indexes,
		Partitions: make([]partmap.PartitionCount, len(out.Partitions))}
	for i, p := range out.Partitions {
		n, err := strconv.ParseUint(strings.TrimPrefix(p.Name, "partition-"), 10, 32)
		if err != nil {
			return partmap.PartitionStats{}, fmt.Errorf("server sent a bad partition name %q", p.Name)
		}
		stats.Partitions[i] = partmap.PartitionCount{Partition: partmap.Partition(n), Profiles: p.Profiles}
	}
	return stats, nil
}

// UpsertProfiles sends the profiles as one bulk request (at most
// partmap.MaxBulkProfiles, and at most MaxBulkBodyBytes of JSON). Profiles
// that meet a lock conflict are sent again, like any conflict. A result's
// Record holds the profile as sent, with its canonical email, and its
// version.
func (c *Client) UpsertProfiles(ctx context.Context, profiles []partmap.Profile) ([]partmap.BulkResult, error) {
	results := make([]partmap.BulkResult, len(profiles))
	var lines [][]byte
	var sent []int // lines[k] is profiles[sent[k]]
	for i, p := range profiles {
		b, err := p.MarshalJSON() // not json.Marshal, which would re-validate it
		if err != nil {
			results[i] = partmap.BulkResult{Err: err} // invalid UTF-8: never sent
			continue
		}
		lines, sent = append(lines, b), append(sent, i)
	}
	lineResults, err := c.UpsertJSONLines(ctx, lines)
	if err != nil {
		return nil, err
	}
	for k, r := range lineResults {
		i := sent[k]
		if r.Err != nil {
			results[i] = partmap.BulkResult{Err: r.Err}
			continue
		}
		p := profiles[i]
		if p.Email() != r.Email { // the server canonicalised it; leave the caller's map alone
			p = p.Clone()
			p[partmap.FieldEmail] = r.Email
		}
		results[i] = partmap.BulkResult{Record: partmap.Record{Profile: p, Version: r.Version}, Created: r.Created}
	}
	return results, nil
}

// LineResult is the outcome of one line of UpsertJSONLines.
type LineResult struct {
	Email   string // canonical
	Version partmap.Version
	Created bool
	Err     error
}

// UpsertJSONLines is UpsertProfiles for profiles already encoded, one JSON
// object per line (without the newline), as an import reads them: they go
// as they are, unparsed. Lines that meet a lock conflict are sent again.
func (c *Client) UpsertJSONLines(ctx context.Context, lines [][]byte) ([]LineResult, error) {
	results := make([]LineResult, len(lines))
	todo := make([]int, len(lines)) // indexes still to send
	for i := range todo {
		todo[i] = i
	}
	deadline := time.Now().Add(c.opts.RetryFor)
	for attempt := 0; len(todo) > 0; attempt++ {
		var body bytes.Buffer
		for _, i := range todo {
			// The server numbers lines, skips blank ones and drops a byte
			// order mark that starts the body: a line that is blank after
			// that, or one that holds a newline, would misnumber the results.
			if bytes.IndexByte(lines[i], '\n') >= 0 || len(bytes.TrimSpace(bytes.TrimPrefix(lines[i], []byte("\ufeff")))) == 0 {
				return nil, fmt.Errorf("bulk line %d is blank or holds a newline", i+1)
			}
			body.Write(lines[i])
			body.WriteByte('\n')
		}
		var reply BulkReplyJSON
		_, err := c.do(ctx, request{method: "POST", path: "/customer-profiles/bulk", body: body.Bytes(), contentType: "application/x-ndjson"}, &reply)
		if err != nil {
			return nil, err
		}
		if len(reply.Results) != len(todo) {
			return nil, fmt.Errorf("bulk reply has %d results for %d profiles", len(reply.Results), len(todo))
		}
		var again []int
		for k, res := range reply.Results {
			if res.Line < 1 || res.Line > len(todo) {
				return nil, fmt.Errorf("bulk reply names line %d of %d", res.Line, len(todo))
			}
			i := todo[res.Line-1]
			if res.Problem != nil {
				err := errorOf(*res.Problem, res.Status)
				results[i] = LineResult{Err: err}
				if err.Code == partmap.ELOCKCONFLICT {
					c.conflicts.Add(1)
					again = append(again, i)
				}
				continue
			}
			v, err := partmap.ParseETag(res.ETag)
			if err != nil {
				return nil, fmt.Errorf("bulk result %d: %w", k, err)
			}
			results[i] = LineResult{Email: res.Email, Version: v, Created: res.Status == http.StatusCreated}
		}
		todo = again
		if len(todo) == 0 || c.opts.RetryFor < 0 || time.Now().After(deadline) {
			break
		}
		if err := sleepCtx(ctx, rand.N(min(c.opts.RetryMax, c.opts.RetryBase<<min(attempt, 20))+1)); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func emailValues(email string) url.Values { return url.Values{"emailAddress": {email}} }

func etagOf(resp *http.Response) (partmap.Version, error) {
	v, err := partmap.ParseETag(resp.Header.Get("ETag"))
	if err != nil {
		return 0, fmt.Errorf("server sent a bad ETag: %w", err)
	}
	return v, nil
}

type request struct {
	method, path string
	query        url.Values
	body         []byte
	contentType  string
	cond         partmap.Condition
	// stream, if set, reads a 2xx body instead of out.
	stream func(*http.Response) error
}

// do sends req, retrying lock conflicts, and decodes a 2xx JSON body into
// out. Any other answer becomes the *partmap.Error the server described.
func (c *Client) do(ctx context.Context, req request, out any) (*http.Response, error) {
	target := c.base + req.path
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}
	deadline := time.Now().Add(c.opts.RetryFor)
	for attempt := 0; ; attempt++ {
		resp, err := c.once(ctx, req, target, out)
		// A conflict inside a 2xx stream came after data was delivered, so
		// the request cannot be replayed.
		if !errors.Is(err, partmap.ErrLockConflict) || (resp != nil && resp.StatusCode < 300) {
			return resp, err
		}
		c.conflicts.Add(1)
		if c.opts.RetryFor < 0 {
			return resp, err
		}
		backoff := min(c.opts.RetryMax, c.opts.RetryBase<<min(attempt, 20))
		sleep := rand.N(backoff + 1)
		if time.Now().Add(sleep).After(deadline) {
			return resp, err
		}
		if err := sleepCtx(ctx, sleep); err != nil {
			return resp, err
		}
	}
}

func (c *Client) once(ctx context.Context, req request, target string, out any) (*http.Response, error) {
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		return nil, err
	}
	if c.opts.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if req.body != nil {
		ct := req.contentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
	}
	switch {
	case len(req.cond.IfMatch) > 0:
		tags := make([]string, len(req.cond.IfMatch))
		for i, v := range req.cond.IfMatch {
			tags[i] = v.ETag()
		}
		hr.Header.Set("If-Match", strings.Join(tags, ", "))
	case req.cond.IfExists:
		hr.Header.Set("If-Match", "*")
	}
	if req.cond.IfNoneMatch {
		hr.Header.Set("If-None-Match", "*")
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if req.stream != nil && resp.StatusCode < 300 {
		return resp, req.stream(resp)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, fmt.Errorf("%s %s: reading the response: %w", req.method, req.path, err)
	}
	if resp.StatusCode >= 300 {
		var p problem
		if json.Unmarshal(data, &p) != nil || p.Type == "" {
			return resp, &partmap.Error{Code: codeForStatus(resp.StatusCode),
				Message: fmt.Sprintf("server answered %s", resp.Status)}
		}
		return resp, errorOf(p, resp.StatusCode)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		var err error
		if u, ok := out.(json.Unmarshaler); ok {
			err = u.UnmarshalJSON(data) // strict decoders validate as they go
		} else {
			err = json.Unmarshal(data, out)
		}
		if err != nil {
			return resp, fmt.Errorf("%s %s: decoding the response: %w", req.method, req.path, err)
		}
	}
	return resp, nil
}
