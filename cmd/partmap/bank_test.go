package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
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
	runBank(t, []string{"--store", "redis://" + redistest.StartTestServer(t).Addr}, 2)
}

// The same on the 3+3 Redis Cluster, where a transaction's partitions sit
// in slots of different masters.
func TestBankOnRedisCluster(t *testing.T) {
	store := onSharedCluster(t, "bank")
	runBank(t, store, 3)
}

func runBank(t *testing.T, store []string, seed uint64) {
	t.Helper()
	bin := binary(t)
	res, err := crashtest.RunBank(context.Background(), crashtest.BankConfig{
		Serve: crashtest.Serve{Binary: bin, Store: store}, Cycles: storetest.CrashCycles(t, 4), Seed: seed, Logf: t.Logf,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Transfers == 0 || res.Reads+res.Exports < int64(res.Cycles) {
		t.Fatal("no transfer completed, or fewer atomic reads and exports than cycles: too little was tested")
	}
}

// The bank test across a Redis master failover: transfers run on a 3+3
// cluster while a master is SIGKILLed and its replica takes over. With
// every step of a transaction acknowledged by a replica
// (--redis-min-replicas-ack 1: DESIGN.md, Transactions across partitions),
// no transaction is left half applied by the failover: once the cluster
// serves again, every account is there and the total holds, read one by
// one and in one transaction. Transfers that meet the failover fail
// cleanly (unavailable, or a lock conflict); after it, those of the slots
// whose new master has no replica keep failing the same way, since no
// replica can acknowledge them.
func TestBankAcrossFailover(t *testing.T) {
	c := redistest.StartTestCluster(t, time.Second)
	url, _ := serveInProcess(t, "--store", c.URL(), "--redis-min-replicas-ack", "1")
	ctx := context.Background()
	bank := crashtest.NewBank(40)
	if err := bank.Open(ctx, mustClient(t, url, nil)); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var done, failed atomic.Int64
	var mu sync.Mutex
	codes := map[partmap.Code]int{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			cl := mustClient(t, url, &pmhttp.ClientOptions{RetryFor: -1})
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for !stop.Load() {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := bank.Transfer(rctx, cl, r)
				cancel()
				if err == nil {
					done.Add(1)
					continue
				}
				failed.Add(1)
				mu.Lock()
				codes[partmap.ErrorCode(err)]++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	before := done.Load()
	victim := c.Masters()[0]
	replica := c.ReplicaOf(victim)
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !c.IsMaster(replica); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replica of the killed master was not promoted within 30 s")
		}
	}
	time.Sleep(2 * time.Second) // transfers go on across and after the takeover
	stop.Store(true)
	wg.Wait()
	t.Logf("%d transfers before the kill, %d in all; %d failed: %v", before, done.Load(), failed.Load(), codes)
	for code := range codes {
		if code != partmap.EUNAVAILABLE && code != partmap.ELOCKCONFLICT {
			t.Errorf("a transfer failed with %s; only unavailable and lock-conflict are clean", code)
		}
	}
	if before == 0 {
		t.Fatal("no transfer completed before the kill, so nothing was tested")
	}

	// The accounts, once the cluster answers every read again. The locks of
	// transactions cut off by the kill lapse after their TTL.
	cl := mustClient(t, url, nil)
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last = bank.Check(ctx, cl); last == nil || !transient(last) {
			break
		}
	}
	if last != nil {
		t.Fatalf("after the failover: %v", last)
	}
}

// transient reports an error that a failover in progress explains.
func transient(err error) bool {
	code := partmap.ErrorCode(err)
	return code == partmap.EUNAVAILABLE || code == partmap.ELOCKCONFLICT
}
