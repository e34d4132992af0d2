package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// openExpiry opens the store on the database where names, "SOCKET DB",
// with a lock TTL that makes a killed server's locks expire soon, so that
// the check after it waits little.
func openExpiry(where string, clock func() time.Time, sweep time.Duration) (crashtest.ExpiryStore, error) {
	var socket string
	var db int
	if _, err := fmt.Sscanf(where, "%s %d", &socket, &db); err != nil {
		return nil, err
	}
	opts := redis.Options{}
	opts.LockTTL, opts.Clock, opts.SweepInterval = 300*time.Millisecond, clock, sweep
	return redis.Open(context.Background(), goredis.NewClient(&goredis.Options{Network: "unix", Addr: socket, DB: db}), &opts)
}

// The Pebble scenario (pebble/crash_expiry_test.go) on Redis: the partmap
// process is SIGKILLed holding locks and in the middle of sweeps, while
// the Redis server keeps what it was sent.
func TestExpiryCrash(t *testing.T) {
	ctx := context.Background()
	cycles := storetest.CrashCycles(t, 6)
	db := int(server.nextDB.Add(1) % databases)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	first, err := redis.Open(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	startOn16(t, first)
	first.Close()
	res, err := crashtest.RunExpiry(ctx, crashtest.ExpiryConfig{
		Cycles: cycles, Seed: 2, Logf: t.Logf, Open: openExpiry, Where: fmt.Sprintf("%s %d", server.socket, db),
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired == 0 || res.InFlight == 0 {
		t.Fatal("no deadline passed across a restart, or no operation was in flight at a kill: nothing was tested")
	}
}
