package http_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
)

func TestRenameRoute(t *testing.T) {
	srv, _ := newStartedServer(t, failFast())
	put := send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(`{"emailAddress":"old@example.com","fullName":"Ada"}`))
	if put.status != 201 {
		t.Fatalf("put: %d %s", put.status, put.body)
	}
	rename := func(from, to string, header ...string) response {
		q := url.Values{"emailAddress": {from}, "to": {to}}
		return send(t, "POST", srv.URL+base+"/customer-profile/rename?"+q.Encode(), nil, header...)
	}
	if r := rename("old@example.com", "NEW@example.com", "If-Match", `"0000000000000001"`); r.status != 412 {
		t.Fatalf("rename with a stale If-Match: %d %s", r.status, r.body)
	}
	r := rename("old@example.com", "NEW@example.com", "If-Match", put.header.Get("ETag"))
	if r.status != 201 || r.header.Get("Location") != base+"/customer-profile?emailAddress=new%40example.com" || r.header.Get("ETag") == "" {
		t.Fatalf("rename: %d Location=%q ETag=%q %s", r.status, r.header.Get("Location"), r.header.Get("ETag"), r.body)
	}
	var got map[string]string
	if err := json.Unmarshal(r.body, &got); err != nil || got["emailAddress"] != "new@example.com" || got["fullName"] != "Ada" {
		t.Fatalf("rename body %s (%v)", r.body, err)
	}
	if g := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=new@example.com", nil); g.header.Get("ETag") != r.header.Get("ETag") {
		t.Fatalf("the stored ETag %q is not the rename's %q", g.header.Get("ETag"), r.header.Get("ETag"))
	}
	send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(`{"emailAddress":"taken@example.com"}`))
	for _, c := range []struct {
		from, to string
		status   int
		typ      string
	}{
		{"old@example.com", "x@example.com", 404, "not-found"},
		{"new@example.com", "taken@example.com", 409, "exists"},
		{"new@example.com", " New@Example.com", 400, "invalid"},
		{"new@example.com", "", 400, "invalid-email"},
	} {
		r := rename(c.from, c.to)
		if p := r.problem(t); r.status != c.status || p["type"] != "urn:partmap:problem:"+c.typ {
			t.Errorf("rename %q to %q: %d %v, want %d %s", c.from, c.to, r.status, p, c.status, c.typ)
		}
	}
	if r := send(t, "POST", srv.URL+base+"/customer-profile/rename?emailAddress=new@example.com", nil); r.status != 400 {
		t.Fatalf("rename without to: %d %s", r.status, r.body)
	}
}

func transact(t *testing.T, srvURL, body string, header ...string) response {
	t.Helper()
	return send(t, "POST", srvURL+base+"/transactions", strings.NewReader(body), append([]string{"Content-Type", "application/json"}, header...)...)
}

func TestTransactionRoute(t *testing.T) {
	srv, store := newStartedServer(t, failFast())
	r := transact(t, srv.URL, `{"operations":[
		{"op":"put","profile":{"emailAddress":"a@example.com","n":"1"},"ifNoneMatch":"*"},
		{"op":"increment","emailAddress":"a@example.com","field":"n","by":41},
		{"op":"increment","emailAddress":"a@example.com","field":"n","by":"-2"},
		{"op":"patch","emailAddress":"a@example.com","patch":{"tier":"gold"}},
		{"op":"rename","emailAddress":"a@example.com","to":"b@example.com"},
		{"op":"put","profile":{"emailAddress":"c@example.com"}},
		{"op":"delete","emailAddress":"c@example.com","ifMatch":"*"}]}`)
	if r.status != 200 {
		t.Fatalf("transaction: %d %s", r.status, r.body)
	}
	var reply struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(r.body, &reply); err != nil || len(reply.Results) != 7 {
		t.Fatalf("reply %s (%v)", r.body, err)
	}
	want := []struct {
		op     string
		status float64
		member string
		value  any
	}{
		{"put", 201, "location", base + "/customer-profile?emailAddress=a%40example.com"},
		{"increment", 200, "value", "42"},
		{"increment", 200, "value", "40"},
		{"patch", 200, "fieldsAdded", 1.0},
		{"rename", 201, "location", base + "/customer-profile?emailAddress=b%40example.com"},
		{"put", 201, "emailAddress", "c@example.com"},
		{"delete", 204, "emailAddress", "c@example.com"},
	}
	for i, w := range want {
		got := reply.Results[i]
		if got["op"] != w.op || got["status"] != w.status || got[w.member] != w.value {
			t.Errorf("result %d: %v, want op %s, status %v, %s %v", i+1, got, w.op, w.status, w.member, w.value)
		}
		if _, has := got["etag"]; has == (w.op == "delete") {
			t.Errorf("result %d: %v: an ETag exactly where the single route sends one", i+1, got)
		}
	}
	g := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=b@example.com", nil)
	if g.status != 200 || g.header.Get("ETag") != reply.Results[4]["etag"] || !strings.Contains(string(g.body), `"n":"40"`) {
		t.Fatalf("after the transaction: %d %s ETag %s", g.status, g.body, g.header.Get("ETag"))
	}

	// A failed condition is 412 and names its operation; nothing is written.
	r = transact(t, srv.URL, `{"operations":[
		{"op":"put","profile":{"emailAddress":"d@example.com"}},
		{"op":"patch","emailAddress":"b@example.com","patch":{"x":"y"},"ifMatch":"\"0000000000000001\""}]}`)
	if p := r.problem(t); r.status != 412 || p["operation"] != 2.0 || !strings.Contains(p["detail"].(string), "operation 2") {
		t.Fatalf("failed condition: %d %v", r.status, p)
	}
	if g := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=d@example.com", nil); g.status != 404 {
		t.Fatalf("a failed transaction wrote its first operation: %d", g.status)
	}

	// A held partition is a lock conflict with Retry-After, and nothing is
	// written.
	release := holdPartition(t, store, "e@example.com")
	r = transact(t, srv.URL, `{"operations":[{"op":"put","profile":{"emailAddress":"d@example.com"}},{"op":"put","profile":{"emailAddress":"e@example.com"}}]}`)
	release()
	if p := r.problem(t); r.status != 409 || p["type"] != "urn:partmap:problem:lock-conflict" || r.header.Get("Retry-After") == "" || p["operation"] != nil {
		t.Fatalf("conflict: %d %v Retry-After %q", r.status, p, r.header.Get("Retry-After"))
	}
	if g := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=d@example.com", nil); g.status != 404 {
		t.Fatalf("a conflicting transaction wrote: %d", g.status)
	}
}

func TestTransactionRouteBadInput(t *testing.T) {
	srv, _ := newStartedServer(t, failFast())
	var many strings.Builder
	many.WriteString(`{"operations":[`)
	for i := range partmap.MaxTransactionOps + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"op":"delete","emailAddress":"m%d@example.com"}`, i)
	}
	many.WriteString("]}")
	for _, c := range []struct {
		name, body string
		status     int
		typ        string
		operation  float64
	}{
		{"not JSON", `{"operations":`, 400, "malformed-json", 0},
		{"a list, not an object", `[]`, 400, "malformed-json", 0},
		{"no operations", `{"operations":[]}`, 400, "invalid", 0},
		{"too many", many.String(), 400, "invalid", 0},
		{"unknown member", `{"operations":[{"op":"delete","emailAddress":"a@example.com","iff":"*"}]}`, 400, "malformed-json", 1},
		{"unknown member, 2nd", `{"operations":[{"op":"delete","emailAddress":"b@example.com"},{"op":"delete","emailAddress":"a@example.com","colour":"red"}]}`, 400, "malformed-json", 2},
		{"member of the wrong type", `{"operations":[{"op":"delete","emailAddress":"b@example.com"},{"op":"persist","emailAddress":"a@example.com","fields":"x"}]}`, 400, "malformed-json", 2},
		{"not an object", `{"operations":[{"op":"delete","emailAddress":"b@example.com"},[]]}`, 400, "malformed-json", 2},
		{"unknown op", `{"operations":[{"op":"delete","emailAddress":"a@example.com"},{"op":"upsert","emailAddress":"a@example.com"}]}`, 400, "invalid", 2},
		{"member of another kind", `{"operations":[{"op":"delete","emailAddress":"a@example.com","to":"b@example.com"}]}`, 400, "invalid", 1},
		{"missing member", `{"operations":[{"op":"increment","emailAddress":"a@example.com","field":"n"}]}`, 400, "invalid", 1},
		{"bad by", `{"operations":[{"op":"increment","emailAddress":"a@example.com","field":"n","by":1.5}]}`, 400, "invalid", 1},
		{"by past int64", `{"operations":[{"op":"increment","emailAddress":"a@example.com","field":"n","by":"9223372036854775808"}]}`, 400, "invalid", 1},
		{"non-string profile value", `{"operations":[{"op":"put","profile":{"emailAddress":"a@example.com","n":1}}]}`, 400, "non-string-value", 1},
		{"bad If-Match", `{"operations":[{"op":"delete","emailAddress":"a@example.com","ifMatch":"nope"}]}`, 400, "invalid", 1},
		{"bad email", `{"operations":[{"op":"delete","emailAddress":"a@example.com"},{"op":"delete","emailAddress":"  "}]}`, 400, "invalid-email", 2},
		{"put's email differs", `{"operations":[{"op":"put","emailAddress":"b@example.com","profile":{"emailAddress":"a@example.com"}}]}`, 400, "invalid", 1},
	} {
		r := transact(t, srv.URL, c.body)
		p := r.problem(t)
		if r.status != c.status || p["type"] != "urn:partmap:problem:"+c.typ || (c.operation != 0 && (p["operation"] != c.operation || !strings.Contains(p["detail"].(string), fmt.Sprintf("operation %v", c.operation)))) {
			t.Errorf("%s: %d %v, want %d %s naming operation %v", c.name, r.status, p, c.status, c.typ, c.operation)
		}
	}
	if r := send(t, "GET", srv.URL+base+"/customer-profiles?limit=10", nil); !strings.Contains(string(r.body), `"profiles":[]`) {
		t.Fatalf("bad transactions wrote something: %s", r.body)
	}
}

// A read token cannot run a transaction.
func TestTransactionNeedsWriteScope(t *testing.T) {
	tokens, parsed := newTokens(t, auth.ScopeRead)
	srv := serveStore(t, newStore(t, nil), &pmhttp.ServerOptions{Tokens: parsed}).URL
	r := transact(t, srv, `{"operations":[{"op":"delete","emailAddress":"a@example.com"}]}`, bearer(tokens[auth.ScopeRead])...)
	if r.status != 403 {
		t.Fatalf("transaction with a read token: %d %s", r.status, r.body)
	}
	q := url.Values{"emailAddress": {"a@example.com"}, "to": {"b@example.com"}}
	if r := send(t, "POST", srv+base+"/customer-profile/rename?"+q.Encode(), nil, bearer(tokens[auth.ScopeRead])...); r.status != 403 {
		t.Fatalf("rename with a read token: %d %s", r.status, r.body)
	}
}
