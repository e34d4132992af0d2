package directory

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
)

// trimInterval is how often the feed is trimmed to its retention, unless
// Options say otherwise: on a backend with hints, the parts written since.
const trimInterval = 10 * time.Second

// defaultFeedPoll is how often a long-poll looks for new changes.
const defaultFeedPoll = 20 * time.Millisecond

// feedScan bounds the events one call reads past a filter, so that a
// filtered page answers in bounded time and moves its cursor on. A
// variable only so that tests can shorten it.
var feedScan = 50_000

// feedLate is how long a call goes on reading, whatever its wait, while
// the backend cannot yet see to the end of its feed (Redis: masters whose
// clocks differ), so that an empty page that is not caught up comes only
// after a filter passed feedScan events or after this long, and a reader
// that asks again at once is not a busy loop.
const feedLate = time.Second

// Changes reads the backend's feed, keeps the changes the filters select,
// and waits, polling, while there are none and q.Wait allows. A backend
// with a FeedSignaler is read again only once its signal has changed.
func (d *Directory) Changes(ctx context.Context, q partmap.ChangeQuery) (partmap.ChangePage, error) {
	if err := d.checkStarted(ctx); err != nil {
		return partmap.ChangePage{}, err
	}
	keep, limit, err := d.changeFilter(q)
	if err != nil {
		return partmap.ChangePage{}, err
	}
	began := time.Now()
	deadline := began.Add(q.Wait)
	late := began.Add(max(q.Wait, feedLate))
	page := partmap.ChangePage{Next: q.After}
	scanned := 0
	for {
		// Taken before the read: an event appended after it changes it.
		var signal string
		if q.Wait > 0 { // only a long poll polls
			signal = d.engine.FeedSignal(ctx) // "": poll by reading
		}
		fp, err := d.engine.Feed(ctx, page.Next, min(limit-len(page.Changes), feedScan-scanned))
		if err != nil {
			return partmap.ChangePage{}, err
		}
		page.Next, page.CaughtUp = fp.Next, fp.End
		scanned += len(fp.Events)
		for _, e := range fp.Events {
			if keep(e.Email) {
				page.Changes = append(page.Changes, partmap.Change{Cursor: e.Cursor, Time: time.UnixMilli(e.Time).UTC(),
					Op: e.Op, Email: e.Email, Record: e.Record})
			}
		}
		now := time.Now()
		switch {
		case len(page.Changes) > 0 || scanned >= feedScan:
			return page, nil
		case len(fp.Events) > 0 && !fp.End:
			continue // all filtered out: read on
		case !now.Before(deadline) && (fp.End || !now.Before(late)):
			return page, nil
		}
		until := deadline
		if !fp.End {
			until = late
		}
		// Wait a poll; after a read that reached the end, wait on for as
		// long as the signal says nothing was appended since.
		for {
			select {
			case <-ctx.Done():
				return partmap.ChangePage{}, ctx.Err()
			case <-time.After(min(d.feedPoll, time.Until(until))):
			}
			if !fp.End || signal == "" {
				break
			}
			if d.engine.FeedSignal(ctx) != signal {
				break
			}
			if !time.Now().Before(deadline) {
				return page, nil
			}
		}
	}
}

// changeFilter checks q and returns which emails it keeps and its limit.
func (d *Directory) changeFilter(q partmap.ChangeQuery) (func(string) bool, int, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = partmap.DefaultChangesPage
	case limit < 0 || limit > partmap.MaxChangesPage:
		return nil, 0, &partmap.Error{Code: partmap.EINVALID, Field: "limit",
			Message: fmt.Sprintf("limit must be 1 to %d, not %d", partmap.MaxChangesPage, limit)}
	}
	if q.Wait < 0 || q.Wait > partmap.MaxChangesWait {
		return nil, 0, &partmap.Error{Code: partmap.EINVALID, Field: "wait",
			Message: fmt.Sprintf("wait must be 0 to %s, not %s", partmap.MaxChangesWait, q.Wait)}
	}
	if q.Email != "" {
		if q.From != 0 || q.To != 0 {
			return nil, 0, partmap.Errorf(partmap.EINVALID, "filter by a profile or by a partition range, not both")
		}
		email, err := partmap.CanonicalEmail(q.Email)
		if err != nil {
			return nil, 0, err
		}
		return func(e string) bool { return e == email }, limit, nil
	}
	if q.From == 0 && q.To == 0 {
		return func(string) bool { return true }, limit, nil
	}
	// Partitions of the layout serving now: a consumer's share stays its
	// share across a resize only in that the profiles it gets are those the
	// current layout puts in its range.
	n := d.serving.Load().cur.Partitions
	to := q.To
	if to == 0 {
		to = partmap.Partition(n)
	}
	if int(to) > n || q.From >= to {
		return nil, 0, &partmap.Error{Code: partmap.EINVALID, Field: "from",
			Message: fmt.Sprintf("the partition range [%d, %d) is not within the %d partitions", q.From, to, n)}
	}
	return func(e string) bool {
		p := partmap.PartitionOf(e, n)
		return p >= q.From && p < to
	}, limit, nil
}

// trimmer keeps the feed within its retention and reports its size.
type trimmer struct {
	background
	retention partmap.Retention
	events    prometheus.Gauge
	bytes     prometheus.Gauge
	oldest    prometheus.Gauge
	age       prometheus.Gauge
	keep      prometheus.Gauge
}

func newTrimmer(r partmap.Retention) *trimmer {
	t := &trimmer{
		retention: r,
		events:    gauge("partmap_feed_events", "Changes the feed holds (as of its last trim)."),
		bytes:     gauge("partmap_feed_bytes", "About how much space the feed takes on disk, where the store knows (as of its last trim)."),
		oldest:    gauge("partmap_feed_oldest_change_seconds", "Unix time of the oldest change the feed holds; 0 when empty."),
		age:       gauge("partmap_feed_retention_seconds", "How long the feed keeps a change (--feed-retention); 0: no bound."),
		keep:      gauge("partmap_feed_retention_events", "How many changes the feed keeps at most (--feed-retention); 0: no bound."),
	}
	t.age.Set(r.Age.Seconds())
	t.keep.Set(float64(r.Events))
	return t
}

func (t *trimmer) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.events, t.bytes, t.oldest, t.age, t.keep}
}

// TrimFeed trims the feed to its retention now, for tests and for the
// trimmer, and returns what is left.
func (d *Directory) TrimFeed(ctx context.Context) (partmap.FeedStats, error) {
	return d.trimFeed(ctx, false)
}

// trimFeed trims the whole feed, or with written, on a backend with hints
// (engine.Hints), only what its hints say was written or aged since its
// last trim.
func (d *Directory) trimFeed(ctx context.Context, written bool) (partmap.FeedStats, error) {
	r := d.trimmer.retention
	var before int64
	if r.Age > 0 {
		before = d.clock().Add(-r.Age).UnixMilli()
	}
	st, err := d.engine.TrimFeed(ctx, before, r.Events, written)
	if err != nil {
		return st, err
	}
	d.trimmer.events.Set(float64(st.Events))
	d.trimmer.bytes.Set(float64(st.Bytes))
	d.trimmer.oldest.Set(float64(st.Oldest) / 1000)
	return st, nil
}

// startTrimmer trims every interval until the directory closes: the whole
// feed first, then, on a backend with hints, only what they say was
// written or aged since.
func (d *Directory) startTrimmer(interval time.Duration) {
	d.trimmer.start(func(ctx context.Context, stop <-chan struct{}) {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		var lastLog time.Time
		whole := true // until a whole trim succeeds
		for {
			_, err := d.trimFeed(ctx, !whole)
			if err == nil {
				whole = false
			} else if ctx.Err() == nil && time.Since(lastLog) > time.Minute {
				slog.Error("trimming the change feed failed; it will be retried", "err", err)
				lastLog = time.Now()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
}
