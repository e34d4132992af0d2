package http_test

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

func TestBackup(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		srv, _ := newStartedServer(t, nil)
		cl := newClient(t, srv.URL, nil)
		ctx := t.Context()
		want := map[string]partmap.Record{}
		for i := range 50 {
			p := partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i), "fullName": fmt.Sprintf("Person %d", i), "visits": fmt.Sprint(i)}
			if i%5 == 0 {
				p["companyName"] = "Acme & Co"
			}
			rec, _, err := partmap.UpsertProfile(ctx, cl, p, partmap.Condition{})
			if err != nil {
				t.Fatal(err)
			}
			want[p.Email()] = rec
		}

		dir := filepath.Join(t.TempDir(), "b")
		var info partmap.BackupInfo
		err := cl.Backup(ctx, func(r io.Reader) (err error) {
			info, err = pebble.Unpack(r, dir, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if info.Files == 0 || info.Bytes == 0 || info.Taken == 0 {
			t.Errorf("manifest %+v: want files, bytes and an instant", info)
		}
		// A write after the backup is not in it.
		if _, _, err := partmap.UpsertProfile(ctx, cl, partmap.Profile{partmap.FieldEmail: "late@example.com"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}

		data := filepath.Join(t.TempDir(), "data")
		got, profiles, err := pebble.Restore(ctx, pebble.BackupDir(dir), data, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, info) || profiles != int64(len(want)) {
			t.Errorf("restore: manifest %+v with %d profiles; want %+v with %d", got, profiles, info, len(want))
		}
		restored, err := pebble.Open(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer restored.Close()
		for email, w := range want {
			rec, err := restored.FindProfile(ctx, email)
			if err != nil {
				t.Fatalf("%s: %v", email, err)
			}
			if !maps.Equal(rec.Profile, w.Profile) || rec.Version != w.Version {
				t.Errorf("%s: got %v version %v, want %v version %v", email, rec.Profile, rec.Version, w.Profile, w.Version)
			}
		}
		if _, err := restored.FindProfile(ctx, "late@example.com"); partmap.ErrorCode(err) != partmap.ENOTFOUND {
			t.Errorf("a profile written after the backup: got %v, want not-found", err)
		}
	})

	// A backup takes as long as its reader does; the server's write
	// timeout, which a slow reader outlasts here, must not cut it short.
	t.Run("OutlastsWriteTimeout", func(t *testing.T) {
		store := newStore(t, nil)
		ctx := t.Context()
		if _, err := store.Start(ctx); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		value := func() string {
			b := make([]byte, 24<<10)
			for i := range b {
				b[i] = byte('!' + rng.IntN(90))
			}
			return string(b)
		}
		// 32 MB, more than loopback's socket buffers hold.
		for batch := range 10 {
			var ps []partmap.Profile
			for i := range 40 {
				ps = append(ps, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("big%d.%d@example.com", batch, i), "a": value(), "b": value(), "c": value()})
			}
			if _, err := store.UpsertProfiles(ctx, ps); err != nil {
				t.Fatal(err)
			}
		}
		srv := httptest.NewUnstartedServer(pmhttp.NewServer(store, &pmhttp.ServerOptions{Logger: slog.New(slog.DiscardHandler)}))
		srv.Config.WriteTimeout = 200 * time.Millisecond
		srv.Start()
		defer srv.Close()
		err := newClient(t, srv.URL, nil).Backup(ctx, func(r io.Reader) error {
			time.Sleep(time.Second) // the server blocks meanwhile, its buffers full
			_, err := pebble.Unpack(r, filepath.Join(t.TempDir(), "b"), nil)
			return err
		})
		if err != nil {
			t.Fatalf("a backup read slower than the write timeout: %v", err)
		}
	})

	t.Run("ErrNotBackuper", func(t *testing.T) {
		store := newStore(t, nil)
		srv := serveStore(t, plainStore{store}, nil)
		r := send(t, "GET", srv.URL+base+"/backup", nil)
		p := r.problem(t)
		detail, _ := p["detail"].(string)
		if r.status != 501 || p["type"] != "urn:partmap:problem:unsupported" ||
			!strings.Contains(detail, "Redis's own persistence") || !strings.Contains(detail, "partmap export") {
			t.Fatalf("got %d %s", r.status, r.body)
		}
		read := false
		err := newClient(t, srv.URL, nil).Backup(t.Context(), func(io.Reader) error { read = true; return nil })
		if partmap.ErrorCode(err) != partmap.EUNSUPPORTED || read {
			t.Fatalf("client: got %v (archive read: %v), want unsupported", err, read)
		}
	})

	// A store on an in-memory filesystem fails before the archive's first
	// byte: the reply is a problem, not an empty 200.
	t.Run("ErrInMemory", func(t *testing.T) {
		srv, _ := newServer(t, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, FS: vfs.NewMem()})
		r := send(t, "GET", srv.URL+base+"/backup", nil)
		if p := r.problem(t); r.status != 501 || p["type"] != "urn:partmap:problem:unsupported" {
			t.Fatalf("got %d %s", r.status, r.body)
		}
	})

	t.Run("ErrReadScope", func(t *testing.T) {
		tokens, parsed := newTokens(t, auth.ScopeRead, auth.ScopeWrite, auth.ScopeAdmin)
		store := newStore(t, nil)
		srv := serveStore(t, store, &pmhttp.ServerOptions{Tokens: parsed})
		for _, scope := range []auth.Scope{auth.ScopeRead, auth.ScopeWrite} {
			r := send(t, "GET", srv.URL+base+"/backup", nil, bearer(tokens[scope])...)
			if p := r.problem(t); r.status != 403 || p["type"] != "urn:partmap:problem:forbidden" {
				t.Errorf("%s: got %d %s, want 403 forbidden", scope, r.status, r.body)
			}
		}
		if r := send(t, "GET", srv.URL+base+"/backup", nil); r.status != 401 {
			t.Errorf("no token: got %d %s, want 401", r.status, r.body)
		}
		cl := newClient(t, srv.URL, &pmhttp.ClientOptions{Token: tokens[auth.ScopeAdmin]})
		err := cl.Backup(t.Context(), func(r io.Reader) error {
			_, err := pebble.Unpack(r, filepath.Join(t.TempDir(), "b"), nil)
			return err
		})
		if err != nil {
			t.Errorf("admin: %v", err)
		}
	})
}
