package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// server is the redis-server TestMain starts on a private unix socket.
var server struct {
	socket string
	nextDB atomic.Int64
}

const databases = 64

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "partmap-redis-")
	if err != nil {
		panic(err)
	}
	single, err := redistest.StartServer(dir, databases)
	if err == nil {
		server.socket = single.Socket
		cluster.Cluster, err = redistest.StartCluster(filepath.Join(dir, "cluster"))
		if err != nil {
			single.Stop()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Stop()
	single.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// open returns a store on an emptied database of its own.
func open(t *testing.T, opts *redis.Options) *redis.Store {
	t.Helper()
	db := int(server.nextDB.Add(1) % databases)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redis.Open(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store { return open(t, nil) })
}

func TestEngine(t *testing.T) {
	storetest.RunEngine(t, func(t *testing.T, wait time.Duration) *engine.Engine {
		if wait == 0 {
			wait = -1 // redis.Options: negative fails fast
		}
		return open(t, &redis.Options{LockWait: wait}).Engine()
	})
}

func TestModel(t *testing.T) {
	storetest.RunModel(t, func(t *testing.T) partmap.Store { return open(t, nil) })
}

// openShared returns two stores on one emptied database, as two partmap
// servers sharing a Redis would be.
func openShared(t *testing.T, opts *redis.Options) (*redis.Store, *redis.Store) {
	t.Helper()
	a := open(t, opts)
	db := int(server.nextDB.Load() % databases)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	b, err := redis.Open(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// Two servers on one Redis serialise their writes through the locks in
// Redis: the history of clients split between them is linearizable.
func TestTwoServersAreLinearizable(t *testing.T) {
	a, b := openShared(t, &redis.Options{LockWait: -1})
	if _, err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	history := storetest.RecordHistory(t, func(i int) partmap.Store {
		if i%2 == 0 {
			return a
		}
		return b
	}, storetest.LinearizabilityOptions{Clients: 8, OpsPerClient: 150, Emails: 3})
	if res := storetest.CheckHistory(t, history); res != porcupine.Ok {
		t.Fatalf("porcupine: %v", res)
	}
}

// A writer whose lock expired cannot commit, even though it got as far as
// the commit: another server may hold the partition now.
func TestExpiredLockCannotCommit(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{LockWait: -1, LockTTL: 50 * time.Millisecond})
	a.Start(ctx)
	const email = "slow@example.com"
	_, p, _ := partmap.Locate(email, partmap.DefaultPartitions)
	inv := engine.Invocation{Load: []partmap.Partition{p}, Lock: []partmap.Partition{p}}
	err := a.Engine().Invoke(ctx, inv, func(tx *engine.Tx) error {
		time.Sleep(100 * time.Millisecond) // the lock expires meanwhile
		if _, _, err := b.UpsertProfile(ctx, partmap.Profile{partmap.FieldEmail: email, "fullName": "b"}, partmap.Condition{}); err != nil {
			t.Errorf("the other server could not write after the lock expired: %v", err)
		}
		return tx.Put(p, email, partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: email, "fullName": "a"}, Version: 1})
	})
	if !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("commit under an expired lock: got %v, want a lock conflict", err)
	}
	if rec, err := b.FindProfile(ctx, email); err != nil || rec.Profile["fullName"] != "b" {
		t.Fatalf("after the refused commit: %v, %v", rec.Profile, err)
	}
}
