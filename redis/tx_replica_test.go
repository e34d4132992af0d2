package redis_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/redis"
)

// A step of a transaction that the replicas of its master have not
// acknowledged may still be lost to a failover. The transaction must then
// show in every partition or in none: no partition may be rolled forward
// on a commit point no replica has, and the record must outlive a
// roll-forward no replica has. One master's replica falls behind
// (SetAckHook, on a server whose WAIT counts 1 replica for every other
// write); then it takes over, which restores that master's slot as it was
// when the replica fell behind, or it catches up.
func TestTxStepsNoReplicaHas(t *testing.T) {
	for _, tc := range []struct {
		name string
		// behind is the partition whose replica falls behind: the
		// transaction's primary, or the other.
		behind string
		// dies: the committer dies after the commit point (a panic,
		// which releases its locks), before rolling anything forward.
		dies bool
		// readDuringWait: a reader of the other account meets its intent
		// while the committer waits for the commit point's replica.
		readDuringWait bool
		// gone: the replica that falls behind is not there at all, so no
		// failover can lose what it lacks, and everyone goes on.
		gone     bool
		failover bool
		want     [2]string // the balances of accounts[0], which the transfer debits, and accounts[1]
	}{
		{name: "CommitPointLost", behind: "primary", failover: true, want: [2]string{"100", "100"}},
		{name: "CommitPointCaughtUp", behind: "primary", want: [2]string{"90", "110"}},
		{name: "ReaderDuringTheWaitThenLost", behind: "primary", readDuringWait: true, failover: true, want: [2]string{"100", "100"}},
		{name: "RollForwardLost", behind: "other", dies: true, failover: true, want: [2]string{"90", "110"}},
		{name: "ReplicaGone", behind: "primary", gone: true, dies: true, want: [2]string{"90", "110"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// No finisher, no backstop: the failover here is by hand
			// (restore), and the hook counts a WAIT after its script has
			// run. A resolver
			// beside the test would act on a count taken after the
			// restore for a script run before it, which no real WAIT
			// reports: its readers run only where the test puts them.
			s := open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: time.Second}, MinReplicasAck: 1,
				ReplicaAckTimeout: time.Millisecond, LockTTL: 200 * time.Millisecond, FinishInterval: -1, BackstopRate: -1})
			raw := rawClient()
			defer raw.Close()
			accounts := spread("behind", 2)
			tags := [2]string{"{" + partOf(accounts[0]).Partition.String() + "}:", "{" + partOf(accounts[1]).Partition.String() + "}:"}

			var (
				lagging   atomic.Value // the tag of the slot whose replica is behind
				primary   = -1         // which account is the primary's
				snapshot  map[string]dumped
				readErr   error
				readFound partmap.Record
				reading   atomic.Bool
			)
			lagging.Store("")
			behindTag := func() string {
				if tc.behind == "primary" {
					return tags[primary]
				}
				return tags[1-primary]
			}
			redis.SetReplicaHook(func(keys []string) (acked, connected int) {
				if tag := lagging.Load().(string); tag != "" && strings.HasPrefix(keys[0], tag) {
					if tc.readDuringWait && tag == tags[primary] && !reading.Swap(true) {
						// The committer's first step after falling behind is the
						// commit point; it waits here while another reads.
						readFound, readErr = s.FindProfile(ctx, accounts[1-primary])
					}
					if tc.gone {
						return 0, 0
					}
					return 0, 1
				}
				return 1, 1
			})
			defer redis.SetReplicaHook(nil)
			openAccounts(t, s, accounts)
			type died struct{}
			redis.SetTxHook(func(step string) {
				switch step {
				case "primary":
					for i, tag := range tags {
						if keys, _ := raw.Keys(ctx, tag+"*:tx:*").Result(); len(keys) > 0 {
							primary = i
						}
					}
				case "prepared":
					if tc.behind == "primary" {
						snapshot = dump(t, raw, behindTag())
						lagging.Store(behindTag())
					}
				case "decided":
					if tc.behind == "other" {
						snapshot = dump(t, raw, behindTag())
						lagging.Store(behindTag())
					}
					if tc.dies {
						panic(died{})
					}
				}
			})
			defer redis.SetTxHook(nil)

			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(died); !ok {
							panic(r)
						}
						err = errors.New("died")
					}
				}()
				return transfer(ctx, s.Engine(), accounts[0], accounts[1], 10)
			}()
			if primary < 0 {
				t.Fatalf("the transfer (%v) made no transaction record", err)
			}
			switch {
			case tc.dies:
			case tc.behind == "primary":
				if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || !strings.Contains(err.Error(), "unknown") {
					t.Errorf("a transfer whose commit point no replica has: %v, want an unknown outcome", err)
				}
			default:
				if err != nil {
					t.Fatalf("transfer: %v", err)
				}
			}
			if tc.readDuringWait {
				if !reading.Load() {
					t.Fatal("no read during the commit point's wait")
				}
				if readErr == nil && readFound.Profile["balance"] != "100" {
					t.Fatalf("a read of the other account while its commit point had no replica: %v; the commit point may still be lost", readFound.Profile)
				}
			}
			// Readers meet the intents while the replica is still behind:
			// each either waits, fails unavailable, or ends the transaction
			// on what the replicas have.
			for i, a := range accounts {
				r, err := s.FindProfile(ctx, a)
				if tc.gone && (err != nil || r.Profile["balance"] != tc.want[i]) {
					t.Errorf("%s, read with its replica gone: %v %v, want balance %s at once", a, r.Profile, err, tc.want[i])
				}
			}
			if tc.failover {
				restore(t, raw, behindTag(), snapshot)
			}
			lagging.Store("")
			redis.SetTxHook(nil)

			var got [2]string
			deadline := time.Now().Add(10 * time.Second)
			for i := 0; i < 2; {
				r, err := s.FindProfile(ctx, accounts[i])
				if err != nil {
					if time.Now().After(deadline) {
						t.Fatalf("%s: %v", accounts[i], err)
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				got[i] = r.Profile["balance"]
				i++
			}
			if got != tc.want {
				t.Fatalf("balances %v, want %v", got, tc.want)
			}
			db := int(server.nextDB.Load() % databases)
			if left := append(singleKeys(t, db, "*pending"), singleKeys(t, db, "*:tx:*")...); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// openAccounts starts s's directory and gives each account a balance of
// 100, with whatever replica hook the test set already in place.
func openAccounts(t *testing.T, s *redis.Store, accounts []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range accounts {
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: a, "balance": "100"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
}

type dumped struct {
	value string
	ttl   time.Duration
}

// dump copies every key of the slot of tag, as the replica that falls
// behind now has them.
func dump(t *testing.T, raw *goredis.Client, tag string) map[string]dumped {
	ctx := context.Background()
	keys, err := raw.Keys(ctx, tag+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dumped{}
	for _, k := range keys {
		v, err := raw.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := raw.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = dumped{v, max(ttl, 0)}
	}
	return out
}

// restore makes the slot of tag what dump found: a failover to the replica
// that fell behind.
func restore(t *testing.T, raw *goredis.Client, tag string, snap map[string]dumped) {
	ctx := context.Background()
	keys, err := raw.Keys(ctx, tag+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := raw.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for k, d := range snap {
		if err := raw.Restore(ctx, k, d.ttl, d.value).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// After a short WAIT, run asks the master's ROLE how many replicas it has:
// none on the lone server, one on each master of the test cluster.
func TestReplicasFromRole(t *testing.T) {
	ctx := context.Background()
	alone := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket})
	defer alone.Close()
	if n := redis.Replicas(ctx, alone); n != 0 {
		t.Errorf("the lone server: %d replicas, want 0", n)
	}
	for _, addr := range cluster.Masters() {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		if n := redis.Replicas(ctx, c); n != 1 {
			t.Errorf("master %s: %d replicas, want 1", addr, n)
		}
		c.Close()
	}
}

// A committer that aborts its own transaction before the commit point
// (here its other partition's lock vanished before that partition's
// intent was written) ends it at once even though its primary's replica
// is behind: it will not commit, whatever a failover brings back, so it
// need not wait for the abort to replicate.
func TestTxOwnAbortWithReplicaBehind(t *testing.T) {
	ctx := context.Background()
	s := open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: time.Second}, MinReplicasAck: 1,
		ReplicaAckTimeout: time.Millisecond, FinishInterval: -1, BackstopRate: -1}) // nobody but the committer ends its transaction (see TestTxStepsNoReplicaHas)
	db := int(server.nextDB.Load() % databases)
	raw := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	defer raw.Close()
	accounts := spread("own", 2)
	var lagging atomic.Value
	lagging.Store("")
	redis.SetReplicaHook(func(keys []string) (int, int) {
		if tag := lagging.Load().(string); tag != "" && strings.HasPrefix(keys[0], tag) {
			return 0, 1
		}
		return 1, 1
	})
	defer redis.SetReplicaHook(nil)
	openAccounts(t, s, accounts)
	redis.SetTxHook(func(step string) {
		if step != "primary" {
			return
		}
		for _, a := range accounts {
			tag := "{" + partOf(a).Partition.String() + "}:"
			if keys, _ := raw.Keys(ctx, tag+"*:tx:*").Result(); len(keys) > 0 {
				lagging.Store(tag) // the primary's replica falls behind
			} else if err := raw.Del(ctx, tag+":lock").Err(); err != nil {
				t.Error(err)
			}
		}
	})
	defer redis.SetTxHook(nil)
	err := transfer(ctx, s.Engine(), accounts[0], accounts[1], 10)
	if !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("a transaction whose other lock vanished before its intent: %v, want a lock conflict", err)
	}
	if lagging.Load().(string) == "" {
		t.Fatal("the primary's replica never fell behind")
	}
	if left := append(singleKeys(t, db, "*pending"), singleKeys(t, db, "*:tx:*")...); len(left) > 0 {
		t.Errorf("left behind while the replica is behind: %v", left)
	}
}
