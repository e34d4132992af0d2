package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/storetest"
)

func mustClient(t *testing.T, url string, opts *pmhttp.ClientOptions) *pmhttp.Client {
	t.Helper()
	c, err := pmhttp.NewClient(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// 64 clients, each with its own connections, write distinct emails that all
// hash to one partition. With --lock-wait 0 they meet real lock conflicts
// and retry; every profile must end up stored with its own data.
func TestSixtyFourClientsOnePartition(t *testing.T) {
	url, _ := serveInProcess(t, "--lock-wait", "0")
	ctx := context.Background()
	if _, err := mustClient(t, url, nil).Start(ctx); err != nil {
		t.Fatal(err)
	}
	const clients, perClient = 64, 8
	emails, p := storetest.Colliding(clients*perClient, partmap.DefaultPartitions, "e2e")
	var wg sync.WaitGroup
	var conflicts atomic.Uint64
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			cl := mustClient(t, url, nil)
			defer func() { conflicts.Add(cl.LockConflicts()) }()
			for i := range perClient {
				email := emails[c*perClient+i]
				prof := partmap.Profile{partmap.FieldEmail: email, "fullName": "owner " + email, "client": fmt.Sprint(c)}
				if _, _, err := partmap.UpsertProfile(ctx, cl, prof, partmap.Condition{}); err != nil {
					errs <- fmt.Errorf("client %d, %s: %w", c, email, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d upserts into %s met %d lock conflicts", len(emails), p, conflicts.Load())
	cl := mustClient(t, url, nil)
	// Exactly once: the partition holds exactly these profiles...
	stats, err := cl.ListPartitions(ctx)
	if err != nil || len(stats.Partitions) != 1 || stats.Partitions[0].Partition != p || stats.Partitions[0].Profiles != int64(len(emails)) {
		t.Fatalf("partitions %+v, %v; want only %s with %d profiles", stats, err, p, len(emails))
	}
	listed := map[string]int{}
	for cursor := ""; ; {
		page, err := cl.ListProfiles(ctx, partmap.ListOptions{Cursor: cursor, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range page.Profiles {
			listed[rec.Profile.Email()]++
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	// ...each once, with its own data.
	for i, email := range emails {
		if listed[email] != 1 {
			t.Fatalf("%s is listed %d times", email, listed[email])
		}
		rec, err := cl.FindProfile(ctx, email)
		if err != nil || rec.Profile["fullName"] != "owner "+email || rec.Profile["client"] != fmt.Sprint(i/perClient) {
			t.Fatalf("%s: %v, %v", email, rec.Profile, err)
		}
	}
}

// Acknowledged writes survive SIGKILL of the real server process.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	data := t.TempDir()
	ctx := context.Background()
	var acked sync.Map    // email -> fullName acknowledged
	var inFlight sync.Map // email -> fullName sent when the server died
	for round := range 3 {
		srv := startProcess(t, data)
		cl := mustClient(t, srv.url, nil)
		if _, err := cl.Start(ctx); err != nil {
			t.Fatal(err)
		}
		// Everything acknowledged before the previous kill is still there.
		n := 0
		acked.Range(func(k, v any) bool {
			n++
			rec, err := cl.FindProfile(ctx, k.(string))
			got := rec.Profile["fullName"]
			if maybe, _ := inFlight.Load(k); err == nil && got == maybe && got != "" {
				acked.Store(k, got) // the write in flight at the kill landed
			} else if err != nil || got != v.(string) {
				t.Fatalf("round %d: acknowledged %s=%q, found %v, %v", round, k, v, rec.Profile, err)
			}
			return true
		})
		inFlight.Clear()
		t.Logf("round %d: %d acknowledged profiles verified after SIGKILL", round, n)

		// Write from 16 clients; kill the server while writes are in flight.
		var count atomic.Int64
		killed := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				cl := mustClient(t, srv.url, &pmhttp.ClientOptions{RetryFor: -1})
				for i := 0; ; i++ {
					email := fmt.Sprintf("w%d-%d@example.com", w, i%40) // overwrites too
					name := fmt.Sprintf("round %d write %d", round, i)
					_, _, err := partmap.UpsertProfile(ctx, cl, partmap.Profile{partmap.FieldEmail: email, "fullName": name}, partmap.Condition{})
					switch {
					case err == nil:
						acked.Store(email, name)
						if count.Add(1) == 400 {
							close(killed)
						}
					case errors.Is(err, partmap.ErrLockConflict):
					default:
						inFlight.Store(email, name) // the server is gone: it may or may not have landed
						return
					}
				}
			})
		}
		<-killed
		srv.kill9(t)
		wg.Wait()
	}
}

// A second server on the same data directory fails at start, clearly, and
// the first one keeps serving.
func TestSecondServerOnOneDirectoryFails(t *testing.T) {
	data := t.TempDir()
	first := startProcess(t, data)
	code, _, errOut := run(t, "", "serve", "--addr", "127.0.0.1:0", "--data", data)
	if code != 1 || !strings.Contains(errOut, "in use by another partmap process") {
		t.Fatalf("second serve: exit %d %q", code, errOut)
	}
	if _, err := mustClient(t, first.url, nil).Start(context.Background()); err != nil {
		t.Fatalf("the first server stopped serving: %v", err)
	}
}
