package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
	"github.com/partmap/partmap/redis"
)

// store is what serve needs of a backend.
type store interface {
	partmap.Store
	Close() error
}

// storeOpeners open a --store URL, by scheme.
var storeOpeners = map[string]func(ctx context.Context, rest string, c serveConfig) (store, error){
	// pebble://DIR is the embedded store in DIR, the same as --data DIR.
	"pebble": func(_ context.Context, dir string, c serveConfig) (store, error) {
		if dir == "" {
			return nil, usagef("pebble:// needs a directory, as in pebble://./partmap-data")
		}
		return pebble.Open(dir, c.storeOptions())
	},
	// redis://[user:password@]HOST:PORT[/DB] is a single Redis server.
	"redis": func(ctx context.Context, rest string, c serveConfig) (store, error) {
		client, err := redis.NewClient("redis://" + rest)
		if err != nil {
			return nil, usagef("--store: %v", err)
		}
		return openRedis(ctx, client, c)
	},
	// redis-cluster://HOST:PORT[,HOST:PORT...] is a Redis Cluster, found
	// through any of its nodes.
	"redis-cluster": func(ctx context.Context, rest string, c serveConfig) (store, error) {
		client, err := redis.NewClient("redis-cluster://" + rest)
		if err != nil {
			return nil, usagef("--store %v", err)
		}
		return openRedis(ctx, client, c)
	},
}

func openRedis(ctx context.Context, client goredis.UniversalClient, c serveConfig) (store, error) {
	s, err := redis.Open(ctx, client, &redis.Options{DirectoryOptions: c.directoryOptions(), MinReplicasAck: c.replicaAcks, Namespace: c.namespace})
	if err != nil {
		client.Close()
		return nil, err
	}
	return s, nil
}

// openStore opens the store that --store (or --data) names.
func openStore(ctx context.Context, c serveConfig) (store, error) {
	if c.store == "" {
		return pebble.Open(c.data, c.storeOptions())
	}
	scheme, rest, ok := strings.Cut(c.store, "://")
	open, known := storeOpeners[scheme]
	if !ok || !known {
		var schemes []string
		for s := range storeOpeners {
			schemes = append(schemes, s+"://")
		}
		slices.Sort(schemes)
		return nil, usagef("--store %q: use one of %s", c.store, strings.Join(schemes, ", "))
	}
	s, err := open(ctx, rest, c)
	if err != nil {
		return nil, fmt.Errorf("--store %s: %w", c.store, err)
	}
	return s, nil
}
