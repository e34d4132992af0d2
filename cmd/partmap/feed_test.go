package main

import (
	"context"
	"testing"
	"time"

	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/storetest"
)

// The change feed across SIGKILLs: workers write a pool of profiles every
// way there is while the real server is killed and restarted. At the end
// the feed, read from the start through the HTTP client and replayed, is
// exactly the directory, versions included; it holds every acknowledged
// write's version; a reader that followed it across every kill read
// exactly it; and a backup taken under load, restored, with the feed after
// its cursor replayed on top, is the directory too. The long form is
//
//	PARTMAP_CRASH_CYCLES=50 go test -run TestFeedCrash -v ./cmd/partmap
func TestFeedCrash(t *testing.T) {
	bin := binary(t)
	res, err := crashtest.RunFeed(context.Background(), crashtest.FeedConfig{
		Serve: crashtest.Serve{Binary: bin, Store: []string{"--data", t.TempDir()}}, Backup: t.TempDir(),
		Workers: 16, Emails: 48, Cycles: storetest.CrashCycles(t, 3), Seed: 1, Logf: t.Logf,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.AfterBackup == 0 || res.Followed == 0 {
		t.Fatal("no change after the backup, or none followed: too little was tested")
	}
}

// The same on the 3+3 Redis Cluster, where the feed is one stream per
// partition number spread over three masters' slots, written by the same
// scripts as the changes. Redis keeps no backup of partmap's (its own RDB
// and AOF do that), so this run takes none. Each load runs for a second or
// more: a killed server's locks keep its partitions from writers for their
// TTL.
func TestFeedCrashOnRedisCluster(t *testing.T) {
	bin := binary(t)
	store := onSharedCluster(t, "feed")
	res, err := crashtest.RunFeed(context.Background(), crashtest.FeedConfig{
		Serve: crashtest.Serve{Binary: bin, Store: store}, Workers: 16, Emails: 48, Cycles: storetest.CrashCycles(t, 3), Seed: 2, Logf: t.Logf,
		Load: time.Second,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Followed < 100 || res.Acknowledged < 100 {
		t.Fatal("fewer than 100 writes acknowledged or changes followed: too little was tested")
	}
}
