package http_test

import (
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
// linearizable. Locks fail fast, so the clients meet lock conflicts and
// retry them. PARTMAP_LIN_OPS sets the operations per client (400).
func TestLinearizability(t *testing.T) {
	ops := 400
	if s := os.Getenv("PARTMAP_LIN_OPS"); s != "" {
		var err error
		if ops, err = strconv.Atoi(s); err != nil || ops < 1 {
			t.Fatalf("PARTMAP_LIN_OPS=%q is not a positive number", s)
		}
	}
	srv, _ := newStartedServer(t, failFast())
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
	if conflicts.Load() == 0 {
		t.Error("no lock conflict happened, so retries went untested")
	}
	if res := storetest.CheckHistory(t, history); res != porcupine.Ok {
		t.Fatalf("porcupine: %v", res)
	}
}

// Transactions, renames and single-profile calls of concurrent HTTP
// clients over four profiles in four partitions make a linearizable
// history; locks fail fast, so the clients meet lock conflicts (a
// transaction's too) and retry them. PARTMAP_TX_CALLS sets the calls per
// client (60).
func TestTxLinearizability(t *testing.T) {
	srv, _ := newStartedServer(t, failFast())
	clients := make([]*pmhttp.Client, 8)
	storetest.CheckTxLinearizable(t, func(i int) partmap.Store {
		clients[i] = newClient(t, srv.URL, nil)
		return clients[i]
	}, storetest.TxLinearizabilityOptions{Clients: len(clients), CallsPerClient: storetest.TxCalls(t, 60)})
	var conflicts uint64
	for _, c := range clients {
		conflicts += c.LockConflicts()
	}
	t.Logf("the clients met and retried %d lock conflicts", conflicts)
}
