package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap/redis"
)

func TestNewClient(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		c, err := redis.NewClient("unix://" + server.socket + "?db=1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, ok := c.(*goredis.Client); !ok || c.(*goredis.Client).Options().DB != 1 {
			t.Fatalf("got %T, want a client of database 1", c)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("OKCluster", func(t *testing.T) {
		c, err := redis.NewClient("redis-cluster://" + strings.Join(cluster.Addrs, ","))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cc, ok := c.(*goredis.ClusterClient)
		if !ok {
			t.Fatalf("got %T, want a cluster client", c)
		}
		if got, want := cc.Options().ClusterStateReloadInterval, 250*time.Millisecond; got != want {
			t.Fatalf("slot map reloaded every %v, want %v", got, want)
		}
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error { return m.Ping(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrURL", func(t *testing.T) {
		for url, want := range map[string]string{
			"redis://127.0.0.1:6379/notadb": "invalid database number",
			"mongodb://127.0.0.1":           "invalid URL scheme",
			"redis-cluster://nohostport":    `redis-cluster://: "nohostport" is not HOST:PORT`,
			"redis-cluster://a:1,,b:2":      `redis-cluster://: "" is not HOST:PORT`,
		} {
			if c, err := redis.NewClient(url); err == nil || !strings.Contains(err.Error(), want) {
				if c != nil {
					c.Close()
				}
				t.Errorf("NewClient(%q): %v, want an error with %q", url, err, want)
			}
		}
	})
}
