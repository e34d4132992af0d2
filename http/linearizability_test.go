package http_test

import (
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/storetest"
)

// Histories of concurrent HTTP clients on a few profiles of one partition are
// linearizable, with the writes of concurrent requests grouped
// (ServerOptions.GroupWrites, as partmap serve has them on Pebble) and
// without. Locks fail fast: without grouping, the clients meet lock
// conflicts and retry them (grouped writes wait for each other's group
// instead). PARTMAP_LIN_OPS sets the operations per client (400).
func TestLinearizability(t *testing.T) {
	ops := 400
	if s := os.Getenv("PARTMAP_LIN_OPS"); s != "" {
		var err error
		if ops, err = strconv.Atoi(s); err != nil || ops < 1 {
			t.Fatalf("PARTMAP_LIN_OPS=%q is not a positive number", s)
		}
	}
	for _, grouped := range []bool{true, false} {
		t.Run(map[bool]string{true: "Grouped", false: "Ungrouped"}[grouped], func(t *testing.T) {
			srv := httptest.NewServer(pmhttp.NewServer(newStore(t, failFast()), &pmhttp.ServerOptions{GroupWrites: grouped}))
			t.Cleanup(srv.Close)
			start(t, srv.URL)
			var conflicts atomic.Uint64
			clients := make([]*pmhttp.Client, 8)
			history := storetest.RecordHistory(t, func(i int) partmap.Store {
				clients[i] = newClient(t, srv.URL, nil)
				return clients[i]
			}, storetest.LinearizabilityOptions{Clients: 8, OpsPerClient: ops, Emails: 3})
			for _, c := range clients {
				conflicts.Add(c.LockConflicts())
			}
			t.Logf("%d operations checked; the clients met and retried %d lock conflicts", len(history), conflicts.Load())
			if !grouped && conflicts.Load() == 0 {
				t.Error("no lock conflict happened, so retries went untested")
			}
			if res := storetest.CheckHistory(t, history); res != porcupine.Ok {
				t.Fatalf("porcupine: %v", res)
			}
		})
	}
}
