package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// Every floor answers as Redis does for what it serves, pipelined or not,
// a read seeing the writes before it in the same pipeline, and keeps the
// writes in its files.
func TestFloors(t *testing.T) {
	for _, kind := range []string{"pebble", "log", "loop", "loop-pebble"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// The server runs until the test binary exits: the event loop
			// has no way to stop, and needs none.
			go func() { serve(ln, kind, dir) }()
			c := goredis.NewClient(&goredis.Options{Addr: ln.Addr().String(), Protocol: 2, DisableIdentity: true})
			defer c.Close()

			if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
				t.Fatalf("PING = %q, %v", got, err)
			}
			if err := c.HGet(ctx, "nobody", "f").Err(); err != goredis.Nil {
				t.Fatalf("HGET of a missing key: %v, want nil", err)
			}
			if err := c.HSet(ctx, "k", "f", "v1").Err(); err != nil {
				t.Fatal(err)
			}
			if got, err := c.HGet(ctx, "k", "f").Result(); err != nil || got != "v1" {
				t.Fatalf("HGET = %q, %v; want v1", got, err)
			}

			// A pipeline of writes with reads among them: every command
			// gets its own reply, in order, and each read sees the
			// writes before it.
			pipe := c.Pipeline()
			var gets []*goredis.StringCmd
			var sets []*goredis.IntCmd
			for i := range 100 {
				sets = append(sets, pipe.HSet(ctx, fmt.Sprintf("p%d", i%10), "f", fmt.Sprint(i)))
				if i%10 == 9 {
					gets = append(gets, pipe.HGet(ctx, fmt.Sprintf("p%d", i%10), "f"))
				}
			}
			unknown := pipe.Do(ctx, "GET", "k")
			if _, err := pipe.Exec(ctx); err == nil {
				t.Fatal("a pipeline with an unknown command had no error")
			}
			for i, s := range sets {
				if s.Err() != nil {
					t.Fatalf("HSET %d: %v", i, s.Err())
				}
			}
			for i, g := range gets {
				if got, want := g.Val(), fmt.Sprint(i*10+9); got != want || g.Err() != nil {
					t.Errorf("HGET after write %s: got %q, %v", want, got, g.Err())
				}
			}
			if unknown.Err() == nil {
				t.Error("GET was answered without an error")
			}

			// Acknowledged means written: the logs (Pebble's WAL,
			// appendonly.log) hold every write.
			size := int64(0)
			filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
				if err == nil && filepath.Ext(path) == ".log" {
					size += info.Size()
				}
				return nil
			})
			if size < int64(100*len("p0f99")) {
				t.Errorf("the logs hold %d bytes after 101 writes", size)
			}
		})
	}
}
