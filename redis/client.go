package redis

import (
	"fmt"
	"net"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// NewClient returns a go-redis client for a URL, to pass to Open:
// redis-cluster://HOST:PORT[,HOST:PORT...] is a Redis Cluster, found through
// any of the nodes it lists; any other URL is one server, as go-redis's
// ParseURL reads it (redis://[user:password@]HOST:PORT[/DB], say). A URL
// it cannot read is an error, and no client.
func NewClient(url string) (goredis.UniversalClient, error) {
	rest, ok := strings.CutPrefix(url, "redis-cluster://")
	if !ok {
		opts, err := goredis.ParseURL(url)
		if err != nil {
			return nil, err
		}
		return goredis.NewClient(opts), nil
	}
	addrs := strings.Split(rest, ",")
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("redis-cluster://: %q is not HOST:PORT", a)
		}
	}
	return goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: addrs,
		// go-redis reloads the slot map every 60 s by default, and a node
		// that refuses connections does not make it reload sooner: a
		// failover must be noticed at once. A reload is one CLUSTER SLOTS.
		ClusterStateReloadInterval: 250 * time.Millisecond,
	}), nil
}
