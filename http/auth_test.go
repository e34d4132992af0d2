package http_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

func TestParseTokens(t *testing.T) {
	_, line, err := pmhttp.NewToken("ci", pmhttp.ScopeWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pmhttp.ParseTokens(strings.NewReader("# comment\n\n" + line + "\n")); err != nil {
		t.Fatalf("OK file: %v", err)
	}
	hash := strings.Fields(line)[2]
	for name, file := range map[string]string{
		"ErrEmpty":      "# nothing\n",
		"ErrFields":     "ci write\n",
		"ErrScope":      "ci superuser " + hash + "\n",
		"ErrHashPrefix": "ci read " + strings.TrimPrefix(hash, "sha256:") + "\n",
		"ErrHashLength": "ci read sha256:abcd\n",
		"ErrDuplicate":  "ci read " + hash + "\nci write " + hash + "\n",
	} {
		if _, err := pmhttp.ParseTokens(strings.NewReader(file)); err == nil {
			t.Errorf("%s: parsed %q", name, file)
		}
	}
	if _, _, err := pmhttp.NewToken("two words", pmhttp.ScopeRead); err == nil {
		t.Error("NewToken accepted a name with a space")
	}
}

func TestAppendToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth")
	for i, scope := range []pmhttp.Scope{pmhttp.ScopeRead, pmhttp.ScopeAdmin} {
		_, line, err := pmhttp.NewToken(fmt.Sprintf("user%d", i), scope)
		if err != nil {
			t.Fatal(err)
		}
		if err := pmhttp.AppendToken(path, line); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if lines := strings.Split(string(b), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "user0 read ") || !strings.HasPrefix(lines[1], "user1 admin ") {
		t.Fatalf("file %q, want the two lines in order", b)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600: the file grants access", fi.Mode().Perm())
	}
	if _, err := pmhttp.LoadTokens(path); err != nil {
		t.Fatal(err)
	}
	if err := pmhttp.AppendToken(filepath.Join(path, "not-a-dir"), "x"); err == nil {
		t.Fatal("appended under a file")
	}
}

func TestAuth(t *testing.T) {
	tokens, parsed := newTokens(t, pmhttp.ScopeRead, pmhttp.ScopeWrite, pmhttp.ScopeAdmin)
	store, err := pebble.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs bytes.Buffer
	srv := httptest.NewServer(pmhttp.NewServer(store, &pmhttp.ServerOptions{Tokens: parsed, Logger: newTextLogger(&logs)}))
	defer srv.Close()
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
		{"ErrReadCannotStart", func() response { return send(t, "POST", u+"/start", nil, bearer(tokens[pmhttp.ScopeRead])...) }, 403},
		{"ErrWriteCannotStart", func() response { return send(t, "POST", u+"/start", nil, bearer(tokens[pmhttp.ScopeWrite])...) }, 403},
		{"AdminStarts", func() response { return send(t, "POST", u+"/start", nil, bearer(tokens[pmhttp.ScopeAdmin])...) }, 200},
		{"ErrReadCannotWrite", func() response { return put(bearer(tokens[pmhttp.ScopeRead])...) }, 403},
		{"WriteWrites", func() response { return put(bearer(tokens[pmhttp.ScopeWrite])...) }, 201},
		{"AdminWrites", func() response { return put(bearer(tokens[pmhttp.ScopeAdmin])...) }, 200},
		{"ErrNoTokenGet", func() response { return send(t, "GET", u+"/customer-profile?emailAddress=a@example.com", nil) }, 401},
		{"ReadReads", func() response {
			return send(t, "GET", u+"/customer-profile?emailAddress=a@example.com", nil, bearer(tokens[pmhttp.ScopeRead])...)
		}, 200},
		{"SchemeIsCaseInsensitive", func() response {
			return send(t, "GET", u+"/partitions", nil, "Authorization", "bearer "+tokens[pmhttp.ScopeRead])
		}, 200},
		{"ReadLists", func() response {
			return send(t, "GET", u+"/customer-profiles", nil, bearer(tokens[pmhttp.ScopeRead])...)
		}, 200},
		{"ErrReadCannotDelete", func() response {
			return send(t, "DELETE", u+"/customer-profile?emailAddress=a@example.com", nil, bearer(tokens[pmhttp.ScopeRead])...)
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
	c := newClient(t, srv.URL, &pmhttp.ClientOptions{Token: tokens[pmhttp.ScopeRead]})
	if _, err := c.FindProfile(ctx, "a@example.com"); err != nil {
		t.Fatalf("client with a read token: %v", err)
	}
	if err := c.DeleteProfile(ctx, "a@example.com", partmap.Condition{}); !errors.Is(err, &partmap.Error{Code: partmap.EFORBIDDEN}) {
		t.Fatalf("client with a read token deleting: %v", err)
	}
	for _, tok := range tokens {
		if strings.Contains(logs.String(), tok) {
			t.Fatal("a token reached the log")
		}
	}
}
