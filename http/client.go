package http

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	// RootCAs are the CAs an https server's certificate must chain to;
	// nil means the system's. Only the client NewClient makes uses them.
	RootCAs *x509.CertPool
	// OnWait, if set, is called before the client waits out a lock
	// conflict whose end the server announced in Retry-After (the
	// whole-map lock), so that a user can be told what it waits for. A
	// conflict that would outlast RetryFor is returned at once instead.
	OnWait func(err *partmap.Error, wait time.Duration)
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
		if c.opts.RootCAs != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: c.opts.RootCAs, MinVersion: tls.VersionTLS12}
		}
		c.opts.HTTPClient = &http.Client{Transport: t}
	}
	c.http = c.opts.HTTPClient
	c.opts.RetryFor = cmp.Or(c.opts.RetryFor, 30*time.Second)
	c.opts.RetryBase = cmp.Or(c.opts.RetryBase, 2*time.Millisecond)
	c.opts.RetryMax = cmp.Or(c.opts.RetryMax, 500*time.Millisecond)
	return c, nil
}

// LockConflicts counts the lock conflicts this client has met, retried or not.
func (c *Client) LockConflicts() uint64 { return c.conflicts.Load() }

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
		var announced *partmap.Error
		long := errors.As(err, &announced) && announced.RetryAfter > backoff
		if long {
			sleep = announced.RetryAfter
		}
		if time.Now().Add(sleep).After(deadline) {
			return resp, err
		}
		if long && c.opts.OnWait != nil {
			c.opts.OnWait(announced, sleep)
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
	ifMatch, ifNoneMatch := req.cond.Values()
	if ifMatch != "" {
		hr.Header.Set("If-Match", ifMatch)
	}
	if ifNoneMatch != "" {
		hr.Header.Set("If-None-Match", ifNoneMatch)
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
		e := errorOf(p, resp.StatusCode)
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 1 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return resp, e
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
	return &partmap.Error{Code: code, Message: msg, Field: p.Field, Limit: p.Limit, LimitBytes: p.LimitBytes, Operation: p.Operation}
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
