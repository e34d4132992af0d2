package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	pmhttp "github.com/partmap/partmap/http"
)

// ceiling is the least a server can do for partmap's PUT and GET: parse the
// JSON enough to find the email, and keep the bytes in a sync.Map. Measured
// with the same clients in the same run, it is this machine's HTTP ceiling.
type ceiling struct {
	profiles sync.Map // email → JSON bytes
}

const ceilingETag = `"0000000000000001"` // the clients want one

// preload stores profiles directly.
func (c *ceiling) preload(keys keySet) {
	for i := range keys.N {
		b, _ := json.Marshal(profile(email(i), i))
		c.profiles.Store(email(i), b)
	}
	for i, e := range keys.Hot {
		b, _ := json.Marshal(profile(e, i))
		c.profiles.Store(e, b)
	}
}

func (c *ceiling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, pmhttp.BasePath)
	switch {
	case r.Method == "POST" && path == "/start":
		w.Write([]byte(`{"started":true,"alreadyStarted":true}`))
	case r.Method == "GET" && path == "/customer-profile":
		b, ok := c.profiles.Load(r.URL.Query().Get("emailAddress"))
		if !ok {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"type":"urn:partmap:problem:not-found","status":404}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", ceilingETag)
		w.Write(b.([]byte))
	case r.Method == "PUT" && path == "/customer-profile":
		body, err := io.ReadAll(r.Body)
		var p struct {
			Email string `json:"emailAddress"`
		}
		if err != nil || json.Unmarshal(body, &p) != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		_, existed := c.profiles.Swap(p.Email, body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", ceilingETag)
		if !existed {
			w.WriteHeader(http.StatusCreated)
		}
		w.Write(body)
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotImplemented)
		w.Write([]byte(`{"type":"urn:partmap:problem:internal","status":501,"detail":"the ceiling serves only PUT and GET"}`))
	}
}

// ceilingWorkloads are the workloads the ceiling can serve.
var ceilingWorkloads = []string{Upsert, Get, Mix, Hot, Zipf}

var _ http.Handler = (*ceiling)(nil)
