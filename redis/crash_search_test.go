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

// openSearch opens the store on the database where names, "SOCKET DB",
// on 128 partitions (every restart checks each one), with a lock TTL that
// makes a killed server's locks expire soon.
func openSearch(where string) (crashtest.ExpiryStore, error) {
	var socket string
	var db int
	if _, err := fmt.Sscanf(where, "%s %d", &socket, &db); err != nil {
		return nil, err
	}
	opts := redis.Options{}
	opts.LockTTL, opts.Partitions = 300*time.Millisecond, 128
	return redis.Open(context.Background(), goredis.NewClient(&goredis.Options{Network: "unix", Addr: socket, DB: db}), &opts)
}

// The Pebble scenario (pebble/crash_search_test.go) on Redis: the partmap
// process is SIGKILLed while a search index builds and another's entries
// are being removed, holding locks, while the Redis server keeps what it
// was sent.
func TestSearchCrash(t *testing.T) {
	ctx := context.Background()
	db := int(server.nextDB.Add(1) % databases)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := crashtest.RunSearch(ctx, crashtest.SearchConfig{
		Cycles: storetest.CrashCycles(t, 4), Seed: 4, Logf: t.Logf, Open: openSearch, Where: fmt.Sprintf("%s %d", server.socket, db), Preload: 1000,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed == 0 || res.InFlight == 0 {
		t.Fatal("no restart found a build to resume, or no write was in flight at a kill: nothing was tested")
	}
}
