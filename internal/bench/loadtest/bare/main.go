// Command bare is the least a server can do for partmap's PUT and GET of a
// customer profile: net/http, one JSON decode, the email trimmed and
// lowercased, and the profile's bytes in a sync.Map. Nothing is durable.
// internal/bench/loadtest measures partmap against it: on the same machine,
// in the same run, it is the ceiling of what net/http alone costs.
//
// It serves the routes the load test uses, on partmap's paths: PUT and GET
// of one profile, POST start (which does nothing) and POST of a bulk body
// of JSON Lines, for preloading. It imports nothing from partmap, so that
// its binary and its memory are net/http's alone.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

const base = "/patterns/hash-partitioned-attribute-map"

type server struct {
	profiles sync.Map // canonical email → the profile's JSON
}

// store decodes one profile and keeps it. It reports whether the email was
// new.
func (s *server) store(body []byte) (created bool, stored []byte, err error) {
	var p map[string]string // a flat object of strings, as partmap takes
	if err := json.Unmarshal(body, &p); err != nil {
		return false, nil, err
	}
	email := strings.ToLower(strings.TrimSpace(p["emailAddress"]))
	if email == "" {
		return false, nil, errors.New("no emailAddress")
	}
	if email != p["emailAddress"] { // keep the canonical form, as partmap does
		p["emailAddress"] = email
		if body, err = json.Marshal(p); err != nil {
			return false, nil, err
		}
	}
	_, existed := s.profiles.Swap(email, body)
	return !existed, body, nil
}

func (s *server) put(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Keep the profile's bytes, not ReadAll's spare capacity (512 bytes at
	// least): a million profiles would otherwise hold half a gigabyte.
	created, body, err := s.store(bytes.Clone(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if created {
		w.WriteHeader(http.StatusCreated)
	}
	w.Write(body)
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	email := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("emailAddress")))
	b, ok := s.profiles.Load(email)
	if !ok {
		http.Error(w, "no profile for "+email, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b.([]byte))
}

// bulk stores one profile a line and answers with counts, as partmap's
// bulk route does (without its per-line results).
func (s *server) bulk(w http.ResponseWriter, r *http.Request) {
	sc := bufio.NewScanner(http.MaxBytesReader(w, r.Body, 16<<20))
	sc.Buffer(nil, 1<<20)
	var created, replaced, failed int
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		switch isNew, _, err := s.store(bytes.Clone(sc.Bytes())); {
		case err != nil:
			failed++
		case isNew:
			created++
		default:
			replaced++
		}
	}
	if err := sc.Err(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"created":%d,"replaced":%d,"failed":%d}`, created, replaced, failed)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "`address` to listen on")
	flag.Parse()
	var s server
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+base+"/customer-profile", s.put)
	mux.HandleFunc("GET "+base+"/customer-profile", s.get)
	mux.HandleFunc("POST "+base+"/customer-profiles/bulk", s.bulk)
	mux.HandleFunc("POST "+base+"/start", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"alreadyStarted":true,"started":true}`))
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
