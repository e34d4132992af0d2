package http_test

import (
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// endless yields n bytes of a JSON string body without holding them.
// The transport reads it on its own goroutine, hence the atomic count.
type endless struct {
	n    int64
	sent atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	sent := e.sent.Load()
	if sent >= e.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), e.n-sent)
	for i := range p[:k] {
		p[i] = 'x'
	}
	if sent == 0 {
		copy(p, `{"emailAddress":"big@example.com","fullName":"`)
	}
	e.sent.Add(k)
	return int(k), nil
}

// A 1 GiB body, sent without a Content-Length, is refused at the limit: the
// server never buffers it, so the memory allocated stays far below its size.
func TestHugeBodyIsNotBuffered(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body := &endless{n: 1 << 30}
	r := send(t, "PUT", srv.URL+base+"/customer-profile", io.MultiReader(body))
	runtime.ReadMemStats(&after)
	if p := r.problem(t); r.status != 413 || p["limit"] != "body" {
		t.Fatalf("got %d %v", r.status, p)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("allocated %d MiB for a refused body", alloc>>20)
	}
	if body.sent.Load() >= body.n {
		t.Fatal("the whole 1 GiB was read before the refusal")
	}
}

// Deep nesting, many fields and a huge field each get a clear 4xx, fast,
// and write nothing.
func TestHostileJSON(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	u := srv.URL + base + "/customer-profile"
	many := &strings.Builder{}
	many.WriteString(`{"emailAddress":"h@example.com"`)
	for i := range 5000 {
		many.WriteString(`,"f` + strings.Repeat("x", 3) + strconv.Itoa(i) + `":"v"`)
	}
	many.WriteString("}")
	for name, tc := range map[string]struct {
		body   string
		status int
		code   string
	}{
		"DeepArray":      {`{"emailAddress":"h@example.com","a":` + strings.Repeat("[", 500000) + strings.Repeat("]", 500000) + `}`, 400, "malformed-json"},
		"DeepObject":     {strings.Repeat(`{"a":`, 100000) + `"x"` + strings.Repeat("}", 100000), 400, "malformed-json"},
		"ShallowNested":  {`{"emailAddress":"h@example.com","a":{"b":{"c":"d"}}}`, 400, "non-string-value"},
		"ManyFields":     {many.String(), 413, "too-many-fields"},
		"LongFieldName":  {`{"emailAddress":"h@example.com","` + strings.Repeat("n", 100000) + `":"v"}`, 413, "too-large"},
		"ManyDuplicates": {`{"emailAddress":"h@example.com"` + strings.Repeat(`,"a":"b"`, 2) + `}`, 400, "malformed-json"},
	} {
		t.Run(name, func(t *testing.T) {
			r := send(t, "PUT", u, strings.NewReader(tc.body))
			if p := r.problem(t); r.status != tc.status || p["type"] != "urn:partmap:problem:"+tc.code {
				t.Fatalf("got %d %v, want %d %s", r.status, p, tc.status, tc.code)
			}
			if r := send(t, "GET", u+"?emailAddress=h@example.com", nil); r.status != 404 {
				t.Fatalf("something was written: %d", r.status)
			}
		})
	}
}
