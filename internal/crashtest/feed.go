package crashtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/storetest"
)

// FeedConfig describes a change feed run: workers write a shared pool of
// profiles in every way there is while the server is SIGKILLed and
// restarted, and a reader follows the feed across the restarts.
type FeedConfig struct {
	Serve
	Workers int // concurrent writers; 8 by default
	Emails  int // the pool they write; 24 by default
	Cycles  int // kill-and-restart cycles
	Seed    uint64
	Logf    func(format string, args ...any)
	// Backup, a scratch directory, takes a backup with `partmap backup`
	// in the middle of the load of the middle cycle and restores it there
	// with `partmap restore`; at the end, the restored directory with the
	// live feed after the backup's cursor replayed on top must be the live
	// directory. Empty: no backup (a store kept by Redis has none).
	Backup string
	// Load is how long the load runs before each kill, at least: 50 ms by
	// default, and up to 250 ms more at random.
	Load time.Duration
}

// FeedResult counts what a feed run checked.
type FeedResult struct {
	Cycles       int
	Acknowledged int // writes acknowledged, each with the version it made
	Changes      int // changes the feed holds at the end
	Followed     int // changes the reader followed across the restarts
	AfterBackup  int // changes replayed on top of the restored backup
}

func (r FeedResult) String() string {
	return fmt.Sprintf("%d kill cycles, %d acknowledged writes, %d changes in the feed, %d followed across the kills by a reader; %d replayed on a restored backup",
		r.Cycles, r.Acknowledged, r.Changes, r.Followed, r.AfterBackup)
}

// ack is a write's outcome the feed must show: email at version.
type ack struct {
	email   string
	version partmap.Version
}

// RunFeed runs the change feed crash test: at the end, the feed read from
// the start through the HTTP client and replayed is exactly the directory,
// versions included; it holds every version a write was acknowledged with;
// a reader that followed it through every kill, resuming from its last
// cursor, read exactly the same changes, no gap and no repeat; and a
// backup plus the feed after its cursor is the directory too.
func RunFeed(ctx context.Context, cfg FeedConfig) (FeedResult, error) {
	cfg.Workers, cfg.Emails, cfg.Load = cmp.Or(cfg.Workers, 8), cmp.Or(cfg.Emails, 24), cmp.Or(cfg.Load, 50*time.Millisecond)
	cfg.Logf = orDiscard(cfg.Logf)
	rng := rand.New(rand.NewPCG(cfg.Seed, 13))
	// Half the pool shares a partition, so that writers meet each
	// other's locks; the rest is spread.
	emails := colliding(cfg.Emails/2, "feed-")
	for i := 0; len(emails) < cfg.Emails; i++ {
		emails = append(emails, fmt.Sprintf("feed-spread%d@crash.test", i))
	}
	var res FeedResult
	var acks []ack
	var followed []partmap.Change
	after := "" // the reader's cursor, kept across the kills
	var backup *partmap.BackupInfo
	restored := ""
	for cycle := 0; ; cycle++ {
		srv, cl, err := cfg.startCycle(ctx, cycle)
		if err != nil {
			return res, err
		}
		if cycle == cfg.Cycles {
			defer srv.kill()
			return res, checkFeed(ctx, cfg, cl, acks, followed, after, backup, restored, &res)
		}

		var acked atomic.Int64
		ws := &workers{cycle: cycle}
		ws.start(cfg.Workers, rng, func(_ int, r *rand.Rand) {
			for {
				got, err := feedWrite(ctx, cl, r, emails)
				var answered *partmap.Error
				switch {
				case err == nil:
					ws.mu.Lock()
					acks = append(acks, got...)
					ws.mu.Unlock()
					acked.Add(1)
				case errors.As(err, &answered) && answered.Code == partmap.EUNAVAILABLE, !errors.As(err, &answered):
					return // the server is gone
				case slices.Contains([]partmap.Code{partmap.ENOTFOUND, partmap.EEXISTS, partmap.ELOCKCONFLICT, partmap.EPRECONDITION}, answered.Code):
					// refused, and wrote nothing
				default:
					ws.fail(err)
					return
				}
			}
		})
		// The reader follows the feed in small long-polled pages, from
		// where it was when the last server died.
		ws.wg.Go(func() {
			for {
				page, err := cl.Changes(ctx, partmap.ChangeQuery{After: after, Limit: 7, Wait: 100 * time.Millisecond})
				var answered *partmap.Error
				switch {
				case err == nil:
					ws.mu.Lock()
					followed = append(followed, page.Changes...)
					after = page.Next
					ws.mu.Unlock()
				case errors.As(err, &answered) && answered.Code == partmap.EUNAVAILABLE, !errors.As(err, &answered):
					return
				default:
					ws.fail(fmt.Errorf("reading the feed after %q: %w", after, err))
					return
				}
			}
		})
		time.Sleep(cfg.Load + time.Duration(rng.IntN(250))*time.Millisecond)
		if cfg.Backup != "" && cycle == cfg.Cycles/2 {
			info, dir, err := takeBackup(ctx, cfg, srv.url)
			if err != nil {
				srv.kill()
				ws.wait()
				return res, fmt.Errorf("cycle %d: %w", cycle, err)
			}
			backup, restored = &info, dir
			cfg.Logf("cycle %d: backed up at feed cursor %s", cycle, info.Feed)
			time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
		}
		srv.kill()
		if err := ws.wait(); err != nil {
			return res, err
		}
		res.Cycles++
		cfg.Logf("cycle %d: killed after %d acknowledged writes; the reader has followed %d changes", cycle, acked.Load(), len(followed))
	}
}

// feedWrite makes one random write through cl and returns the versions it
// was acknowledged with.
func feedWrite(ctx context.Context, cl *pmhttp.Client, r *rand.Rand, emails []string) ([]ack, error) {
	e, f := emails[r.IntN(len(emails))], emails[r.IntN(len(emails))]
	tag := strconv.FormatUint(r.Uint64()%1000, 10)
	switch r.IntN(7) {
	case 0, 1:
		rec, _, err := partmap.UpsertProfile(ctx, cl, partmap.Profile{partmap.FieldEmail: e, "n": "0", "a": tag}, partmap.Condition{})
		return []ack{{e, rec.Version}}, err
	case 2:
		// A patch that changes nothing answers the version an earlier
		// write made: the feed has that one too.
		res, err := partmap.PatchProfile(ctx, cl, e, partmap.Patch{"a": &tag, "b": nil}, partmap.Condition{})
		return []ack{{e, res.Record.Version}}, err
	case 3:
		inc, err := partmap.IncrementField(ctx, cl, e, "n", 1, partmap.Condition{})
		return []ack{{e, inc.Version}}, err
	case 4:
		return nil, partmap.DeleteProfile(ctx, cl, e, partmap.Condition{})
	case 5:
		if e == f {
			return nil, nil
		}
		rec, err := partmap.RenameProfile(ctx, cl, e, f, partmap.Condition{})
		return []ack{{f, rec.Version}}, err
	default:
		g := emails[r.IntN(len(emails))]
		ops := []partmap.Operation{
			{Op: partmap.OpIncrement, Email: e, Field: "n", By: 1},
			{Op: partmap.OpPatch, Email: f, Patch: partmap.Patch{"b": &tag}},
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: g, "n": "0", "a": tag}},
		}
		results, err := cl.Transact(ctx, ops)
		if err != nil {
			return nil, err
		}
		// The feed has a profile's last version in the transaction.
		last := map[string]partmap.Version{}
		for _, res := range results {
			if res.Record != nil {
				last[res.Email] = res.Record.Version
			}
		}
		var out []ack
		for _, email := range slices.Sorted(maps.Keys(last)) {
			out = append(out, ack{email, last[email]})
		}
		return out, nil
	}
}

// takeBackup runs `partmap backup` against the server and `partmap
// restore` of what it wrote, and returns the backup's manifest and the
// restored data directory.
func takeBackup(ctx context.Context, cfg FeedConfig, url string) (partmap.BackupInfo, string, error) {
	var info partmap.BackupInfo
	dir, data := filepath.Join(cfg.Backup, "backup"), filepath.Join(cfg.Backup, "restored")
	for _, args := range [][]string{{"backup", "--server", url, dir}, {"restore", "--data", data, dir}} {
		out, err := exec.CommandContext(ctx, cfg.Binary, args...).CombinedOutput()
		if err != nil {
			return info, "", fmt.Errorf("partmap %s: %v: %s", args[0], err, out)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, partmap.BackupManifest))
	if err == nil {
		err = json.Unmarshal(raw, &info)
	}
	if err == nil && info.Feed == "" {
		err = fmt.Errorf("the backup's manifest names no feed cursor: %s", raw)
	}
	return info, data, err
}

// readFeed reads the feed after cursor to its end.
func readFeed(ctx context.Context, cl *pmhttp.Client, cursor string) ([]partmap.Change, error) {
	var out []partmap.Change
	for {
		page, err := cl.Changes(ctx, partmap.ChangeQuery{After: cursor, Limit: 500})
		if err != nil {
			return nil, fmt.Errorf("reading the feed after %q: %w", cursor, err)
		}
		out, cursor = append(out, page.Changes...), page.Next
		if page.CaughtUp {
			return out, nil
		}
	}
}

// checkFeed checks the feed, with the server quiet, against the directory,
// the acknowledged writes, the reader and the backup.
func checkFeed(ctx context.Context, cfg FeedConfig, cl *pmhttp.Client, acks []ack, followed []partmap.Change, after string,
	backup *partmap.BackupInfo, restored string, res *FeedResult) error {
	// The directory first: its export ends the transactions a kill left
	// (on Redis, rolling a committed one forward on its other partitions),
	// which appends their events; a feed read before would lack them.
	live, err := storetest.StoreState(ctx, cl)
	if err != nil {
		return err
	}
	all, err := readFeed(ctx, cl, "")
	if err != nil {
		return err
	}
	res.Changes, res.Acknowledged = len(all), len(acks)
	if d := storetest.DiffStates(storetest.Replay(all), live); d != "" {
		return fmt.Errorf("replaying the %d changes of the feed does not give the directory's %d profiles: %s", len(all), len(live), d)
	}
	versions := map[ack]bool{}
	for _, c := range all {
		if c.Record != nil {
			versions[ack{c.Email, c.Record.Version}] = true
		}
	}
	for _, a := range acks {
		if !versions[a] {
			return fmt.Errorf("%s was acknowledged at version %s, which is not in the feed", a.email, a.version.ETag())
		}
	}
	// The reader followed the feed across every kill: with what is left
	// after its last cursor, it read exactly the feed.
	rest, err := readFeed(ctx, cl, after)
	if err != nil {
		return fmt.Errorf("the reader's cursor from before the last kill: %w", err)
	}
	followed = append(followed, rest...)
	res.Followed = len(followed)
	if len(followed) != len(all) {
		return fmt.Errorf("a reader that followed the feed across the kills read %d changes; it holds %d", len(followed), len(all))
	}
	for i := range all {
		if a, b := all[i], followed[i]; a.Cursor != b.Cursor || a.Email != b.Email || a.Op != b.Op || !storetest.SameRecord(a.Record, b.Record) {
			return fmt.Errorf("change %d: the feed has %s %s %s, the reader that followed it read %s %s %s", i, a.Cursor, a.Op, a.Email, b.Cursor, b.Op, b.Email)
		}
	}
	if len(acks) == 0 || len(all) == 0 {
		return fmt.Errorf("no write was acknowledged: nothing was tested")
	}
	if cfg.Backup == "" {
		return nil
	}
	if backup == nil {
		return fmt.Errorf("no backup was taken")
	}
	srv, err := start(ctx, Serve{Binary: cfg.Binary, Data: restored})
	if err != nil {
		return fmt.Errorf("serving the restored backup: %w", err)
	}
	defer srv.kill()
	rc, err := pmhttp.NewClient(srv.url, nil)
	if err != nil {
		return err
	}
	base, err := storetest.StoreState(ctx, rc)
	if err != nil {
		return fmt.Errorf("the restored backup: %w", err)
	}
	since, err := readFeed(ctx, cl, backup.Feed)
	if err != nil {
		return fmt.Errorf("the backup's feed cursor: %w", err)
	}
	res.AfterBackup = len(since)
	storetest.ReplayOnto(base, since)
	if d := storetest.DiffStates(base, live); d != "" {
		return fmt.Errorf("the backup of feed cursor %s with the %d changes after it is not the directory: %s", backup.Feed, len(since), d)
	}
	return nil
}
