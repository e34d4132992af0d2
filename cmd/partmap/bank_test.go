package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/redistest"
)

// The bank test: 40 accounts over many partitions, 6 workers moving
// amounts between them in transactions, one reading every balance in one
// transaction and one exporting snapshots, while the real server is
// SIGKILLed at random moments and restarted. The total never changes and
// no account goes missing. The long form is
//
//	PARTMAP_CRASH_CYCLES=100 go test -run TestBank -timeout 60m -v ./cmd/partmap
func TestBank(t *testing.T) {
	runBank(t, []string{"--data", t.TempDir()}, 1)
}

// The bank test on one Redis server: transactions over several partitions
// commit through the Redis commit protocol (DESIGN.md), and a SIGKILL of
// the partmap server at any step leaves each wholly applied or not at all.
func TestBankOnRedis(t *testing.T) {
	srv, err := redistest.StartServer(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	runBank(t, []string{"--store", "redis://" + srv.Addr}, 2)
}

// The same on the 3+3 Redis Cluster, where a transaction's partitions sit
// in slots of different masters.
func TestBankOnRedisCluster(t *testing.T) {
	c, err := testCluster()
	if err != nil {
		t.Fatal(err)
	}
	store := []string{"--store", "redis-cluster://" + strings.Join(c.Addrs, ","), "--redis-namespace", "bank" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	runBank(t, store, 3)
}

func runBank(t *testing.T, store []string, seed uint64) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := crashtest.RunBank(context.Background(), crashtest.BankConfig{
		Binary: bin, Store: store, Cycles: crashCycles(t, 4), Seed: seed, Logf: t.Logf,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Transfers == 0 || res.Reads == 0 || res.Exports == 0 {
		t.Fatal("no transfer, atomic read or export completed, so nothing was tested")
	}
}
