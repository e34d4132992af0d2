package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// watchPoll is how long one request of `partmap watch` waits for a change.
const watchPoll = 30 * time.Second

// watchBackoff bounds the wait between retries while the server is away.
var watchBackoff = struct{ first, max time.Duration }{100 * time.Millisecond, 5 * time.Second}

func runWatch(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "watch", "")
	fs := cf.fs
	fs.Usage = func() {
		fmt.Fprint(e.stderr, `usage: partmap watch [flags]

Prints the change feed, one change per line, oldest first, and follows it
until interrupted. A line reads

  TIME OP EMAIL ETAG PROFILE

with TIME in UTC to the millisecond, and PROFILE the whole profile after the
change as JSON; a deletion shows - for both ETAG and PROFILE. --json prints
each change as the server sends it instead, one JSON object per line, with
its cursor.

Where it starts: --after now (the default) shows only the changes made from
the server's first answer on; --after start every change the feed still
holds; --after CURSOR the changes after a cursor printed by --json. --once prints what is there and
exits; it starts at the start unless --after says otherwise.

While following, it survives a server restart: it retries, backing off, and
resumes where it was, printing nothing twice. A cursor older than the
feed's retention (serve --feed-retention) ends it with exit status 1.

flags:
`)
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print each change as one line of JSON, as the server sends it (JSON Lines)")
	after := fs.String("after", partmap.FeedNow, "`where` to start: now, start, or a CURSOR")
	email := fs.String("email", "", "only the changes of this profile (any spelling)")
	from := fs.Int("from", 0, "only the profiles in partitions from this `number` on")
	to := fs.Int("to", 0, "only the profiles in partitions before this `number` (0: up to the last)")
	limit := fs.Int("limit", partmap.DefaultChangesPage, "at most `N` changes per request")
	once := fs.Bool("once", false, "print the changes there are, then exit, instead of following")
	_, cl, err := cf.parse(args, 0, 0)
	if err != nil {
		return err
	}
	switch {
	case *limit < 1 || *limit > partmap.MaxChangesPage:
		return usagef("--limit must be from 1 to %d", partmap.MaxChangesPage)
	case *from < 0 || *to < 0:
		return usagef("--from and --to are partition numbers")
	case *email != "" && (*from != 0 || *to != 0):
		return usagef("--email and --from/--to select differently; give one")
	}
	q := partmap.ChangeQuery{After: *after, Limit: *limit, Email: *email,
		From: partmap.Partition(*from), To: partmap.Partition(*to)}
	if *once && !flagGiven(fs, "after") {
		q.After = "start"
	}
	if q.After == "start" {
		q.After = "" // the feed's own spelling of its oldest change
	}
	w := &watcher{cl: cl, out: e.stdout, stderr: e.stderr, json: *asJSON}
	if *once {
		return w.drain(ctx, q)
	}
	err = w.follow(ctx, q)
	if ctx.Err() != nil {
		return nil // interrupted: the way a follower ends
	}
	return err
}

type watcher struct {
	cl     *pmhttp.Client
	out    io.Writer
	stderr io.Writer
	json   bool
}

// drain prints every change after q.After and returns at the feed's end:
// the first page that is caught up. A page that is not holds changes, or
// passed over many that a filter left out, or came after the server
// waited for its clocks, so asking again at once is no busy loop.
func (w *watcher) drain(ctx context.Context, q partmap.ChangeQuery) error {
	for {
		page, err := w.cl.Changes(ctx, q)
		if err != nil {
			return watchError(err)
		}
		if err := w.print(page.Changes); err != nil {
			return err
		}
		if page.CaughtUp {
			return nil
		}
		q.After = page.Next
	}
}

// follow long-polls the feed until ctx ends, riding out a server that goes
// away: it resumes from the last page's Next, so nothing is lost or
// printed twice.
//
// "now" is pinned first, by a request that does not wait: a long poll of
// "now" that a restart cut short would ask for "now" again, and skip what
// was written while the server came back.
func (w *watcher) follow(ctx context.Context, q partmap.ChangeQuery) error {
	pinning := q.After == partmap.FeedNow
	backoff, failing := time.Duration(0), ""
	for ctx.Err() == nil {
		q.Wait = watchPoll
		if pinning {
			q.Wait = 0
		}
		// A bound of its own, should the connection die silently.
		rctx, cancel := context.WithTimeout(ctx, q.Wait+30*time.Second)
		page, err := w.cl.Changes(rctx, q)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !transientWatchError(err) {
				return watchError(err)
			}
			backoff = min(watchBackoff.max, max(watchBackoff.first, 2*backoff))
			if msg := describe(err); msg != failing {
				fmt.Fprintf(w.stderr, "partmap watch: %s; retrying\n", msg)
				failing = msg
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		if failing != "" {
			fmt.Fprintln(w.stderr, "partmap watch: reconnected")
			backoff, failing = 0, ""
		}
		if err := w.print(page.Changes); err != nil {
			return err
		}
		q.After, pinning = page.Next, false
	}
	return nil
}

// transientWatchError reports whether err may pass by itself: the server unreachable
// or restarting, not yet started, overloaded or failing for now. A refusal
// of the request (a bad cursor, a bad token) or an expired cursor is not.
func transientWatchError(err error) bool {
	var perr *partmap.Error
	if !errors.As(err, &perr) {
		return true // the network, or a reply that was not the server's
	}
	switch perr.Code {
	case partmap.EUNAVAILABLE, partmap.ENOTSTARTED, partmap.ELOCKCONFLICT, partmap.ETIMEOUT, partmap.EINTERNAL:
		return true
	}
	return false
}

// watchError says what an expired cursor means for the one watching.
func watchError(err error) error {
	if partmap.ErrorCode(err) == partmap.ECURSOREXPIRED {
		return fmt.Errorf("%s; the changes after it are gone: start again from --after now or --after start (after reloading from an export, if you keep a copy)", describe(err))
	}
	return err
}

func (w *watcher) print(changes []partmap.Change) error {
	for _, c := range changes {
		var err error
		if w.json {
			var line []byte
			if line, err = pmhttp.MarshalChange(c); err == nil {
				_, err = fmt.Fprintf(w.out, "%s\n", line)
			}
		} else {
			_, err = fmt.Fprintln(w.out, humanChange(c))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// humanChange is a change as `partmap watch` prints it by default.
func humanChange(c partmap.Change) string {
	at := c.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if c.Deleted() {
		return fmt.Sprintf("%s %s %s - -", at, c.Op, c.Email)
	}
	profile, err := c.Record.Profile.MarshalJSON()
	if err != nil {
		profile = []byte("?") // stored text that no longer encodes; the server would have said so
	}
	return fmt.Sprintf("%s %s %s %s %s", at, c.Op, c.Email, c.Record.Version.ETag(), profile)
}
