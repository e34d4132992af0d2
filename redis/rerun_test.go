package redis_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/redis"
)

// busyRefusals returns how many commits Redis has refused because another
// server held the partition's lock (PARTMAP_BUSY), over every database.
func busyRefusals(t *testing.T) int {
	t.Helper()
	c := rawClient()
	defer c.Close()
	info, err := c.Info(context.Background(), "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`errorstat_PARTMAP_BUSY:count=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A checked write whose commit meets another server's lock runs again
// under the lock, and so does its handler: what the write answers is what
// its last run did, not the sum of its runs. (A patch that deleted one
// field answered "2 deleted" in TestResizeSeenByAnotherServer, whose
// switch holds every lock.)
func TestWriteRunAgainAnswersOnce(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: time.Minute}})
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const email = "again@example.com"
	if _, _, err := partmap.UpsertProfile(ctx, a, partmap.Profile{partmap.FieldEmail: email, "old": "1", "visits": "1"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	_, p, _ := partmap.Locate(email, partmap.DefaultPartitions)
	part := engine.Part{Partition: p}
	for _, tc := range []struct {
		name  string
		write func() (string, error)
		want  string
	}{
		{"Patch", func() (string, error) {
			v := "x"
			res, err := partmap.PatchProfile(ctx, b, email, partmap.Patch{"old": nil, "new": &v}, partmap.Condition{})
			return "+" + strconv.Itoa(res.FieldsAdded) + " -" + strconv.Itoa(res.FieldsDeleted), err
		}, "+1 -1"},
		{"Increment", func() (string, error) {
			inc, err := partmap.IncrementField(ctx, b, email, "visits", 1, partmap.Condition{})
			return strconv.FormatInt(inc.Value, 10), err
		}, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				held <- a.Engine().Invoke(ctx, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}, func(*engine.Tx) error {
					close(locked)
					<-release
					return nil
				})
			}()
			<-locked
			before := busyRefusals(t)
			type answer struct {
				got string
				err error
			}
			answered := make(chan answer, 1)
			go func() {
				got, err := tc.write()
				answered <- answer{got, err}
			}()
			// Release only once the write's first run has met the lock.
			for deadline := time.Now().Add(10 * time.Second); busyRefusals(t) == before; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					close(release)
					t.Fatal("the write never met the held lock")
				}
			}
			close(release)
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			if ans := <-answered; ans.err != nil || ans.got != tc.want {
				t.Fatalf("a write run again: answered %s, %v; want %s", ans.got, ans.err, tc.want)
			}
		})
	}
}
