package http_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
)

func TestAuth(t *testing.T) {
	tokens, parsed := newTokens(t, auth.ScopeRead, auth.ScopeWrite, auth.ScopeAdmin)
	store := newStore(t, nil)
	var logs bytes.Buffer
	srv := serveStore(t, store, &pmhttp.ServerOptions{Tokens: parsed, Logger: newTextLogger(&logs)})
	u := srv.URL + base

	put := func(h ...string) response {
		return send(t, "PUT", u+"/customer-profile", strings.NewReader(`{"emailAddress":"a@example.com"}`), h...)
	}
	steps := []struct {
		name   string
		do     func() response
		status int
	}{
		{"ErrNoToken", func() response { return send(t, "POST", u+"/start", nil) }, 401},
		{"ErrBasicAuth", func() response { return send(t, "POST", u+"/start", nil, "Authorization", "Basic YTpi") }, 401},
		{"ErrBadToken", func() response { return send(t, "POST", u+"/start", nil, bearer("pm_nope")...) }, 401},
		{"ErrReadCannotStart", func() response { return send(t, "POST", u+"/start", nil, bearer(tokens[auth.ScopeRead])...) }, 403},
		{"ErrWriteCannotStart", func() response { return send(t, "POST", u+"/start", nil, bearer(tokens[auth.ScopeWrite])...) }, 403},
		{"AdminStarts", func() response { return send(t, "POST", u+"/start", nil, bearer(tokens[auth.ScopeAdmin])...) }, 200},
		{"ErrReadCannotWrite", func() response { return put(bearer(tokens[auth.ScopeRead])...) }, 403},
		{"WriteWrites", func() response { return put(bearer(tokens[auth.ScopeWrite])...) }, 201},
		{"AdminWrites", func() response { return put(bearer(tokens[auth.ScopeAdmin])...) }, 200},
		{"ErrNoTokenGet", func() response { return send(t, "GET", u+"/customer-profile?emailAddress=a@example.com", nil) }, 401},
		{"ReadReads", func() response {
			return send(t, "GET", u+"/customer-profile?emailAddress=a@example.com", nil, bearer(tokens[auth.ScopeRead])...)
		}, 200},
		{"SchemeIsCaseInsensitive", func() response {
			return send(t, "GET", u+"/partitions", nil, "Authorization", "bearer "+tokens[auth.ScopeRead])
		}, 200},
		{"ReadLists", func() response {
			return send(t, "GET", u+"/customer-profiles", nil, bearer(tokens[auth.ScopeRead])...)
		}, 200},
		{"ErrReadCannotDelete", func() response {
			return send(t, "DELETE", u+"/customer-profile?emailAddress=a@example.com", nil, bearer(tokens[auth.ScopeRead])...)
		}, 403},
	}
	for _, st := range steps {
		r := st.do()
		if r.status != st.status {
			t.Fatalf("%s: got %d %s, want %d", st.name, r.status, r.body, st.status)
		}
		if st.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: 401 without a Bearer challenge", st.name)
		}
		if st.status >= 400 {
			code := map[int]string{401: "unauthorized", 403: "forbidden"}[st.status]
			if p := r.problem(t); p["type"] != "urn:partmap:problem:"+code {
				t.Fatalf("%s: %v", st.name, p)
			}
		}
	}

	ctx := context.Background()
	c := newClient(t, srv.URL, &pmhttp.ClientOptions{Token: tokens[auth.ScopeRead]})
	if _, err := c.FindProfile(ctx, "a@example.com"); err != nil {
		t.Fatalf("client with a read token: %v", err)
	}
	if err := partmap.DeleteProfile(ctx, c, "a@example.com", partmap.Condition{}); !errors.Is(err, &partmap.Error{Code: partmap.EFORBIDDEN}) {
		t.Fatalf("client with a read token deleting: %v", err)
	}
	for _, tok := range tokens {
		if strings.Contains(logs.String(), tok) {
			t.Fatal("a token reached the log")
		}
	}
}
