package redis_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/redis"
)

// expiryChildEnv holds the seed, socket and database of a writer that
// TestExpiryCrash kills.
const expiryChildEnv = "PARTMAP_EXPIRY_CHILD"

// expiryOptions make a killed server's locks expire soon, so that the
// check after it waits little.
func expiryOptions(clock func() time.Time, sweep time.Duration) *redis.Options {
	opts := redis.Options{}
	opts.LockTTL, opts.Clock, opts.SweepInterval = 300*time.Millisecond, clock, sweep
	return &opts
}

func expiryChild(v string) int {
	var seed uint64
	var socket string
	var db int
	if _, err := fmt.Sscanf(v, "%d %s %d", &seed, &socket, &db); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: socket, DB: db})
	s, err := redis.Open(context.Background(), c, expiryOptions(nil, 100*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintln(os.Stderr, crashtest.ExpiryChild(context.Background(), s, os.Stdout, seed))
	return 3
}

// The Pebble scenario (pebble/crash_expiry_test.go) on Redis: the partmap
// process is SIGKILLed holding locks and in the middle of sweeps, while
// the Redis server keeps what it was sent.
func TestExpiryCrash(t *testing.T) {
	ctx := context.Background()
	cycles := 6
	if n, err := strconv.Atoi(os.Getenv("PARTMAP_CRASH_CYCLES")); err == nil && n > 0 {
		cycles = n // a long run
	}
	db := int(server.nextDB.Add(1) % databases)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	first, err := redis.Open(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// A few partitions, as on Pebble: every check reads each one.
	for st, err := first.Resize(ctx, 16); st.Running || err != nil; st, err = first.ResizeStatus(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.Close()
	res, err := crashtest.RunExpiry(ctx, crashtest.ExpiryConfig{
		Cycles: cycles, Seed: 2, Logf: t.Logf,
		Child: func(cycle int, seed uint64) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s %d", expiryChildEnv, seed, server.socket, db))
			cmd.Stderr = os.Stderr
			return cmd
		},
		Open: func(clock func() time.Time, sweep time.Duration) (partmap.Store, func(), error) {
			c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
			s, err := redis.Open(ctx, c, expiryOptions(clock, sweep))
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired == 0 || res.InFlight == 0 {
		t.Fatal("no deadline passed across a restart, or no operation was in flight at a kill: nothing was tested")
	}
}
