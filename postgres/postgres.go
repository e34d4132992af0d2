// Package postgres keeps a live projection of a partmap directory in a
// PostgreSQL table: one row per profile,
//
//	email text PRIMARY KEY, profile jsonb NOT NULL, etag text NOT NULL, updated_at timestamptz NOT NULL
//
// so that the directory can be queried with SQL (profile->>'companyName' =
// $1) while partmap stays the system of record. Project follows the
// directory's change feed (partmap.Feeder) and applies each page of changes
// in one PostgreSQL transaction together with the feed cursor it has
// reached, which it keeps in the table partmap_projection (name text
// PRIMARY KEY, cursor text, change_time timestamptz, updated_at
// timestamptz), one row per projected table. The cursor moves atomically
// with the rows, so a projector killed at any point resumes exactly after
// the last page it committed: every change is applied exactly once.
//
// A new projection, or one rebuilt (Options.Rebuild), first takes the
// feed's newest cursor (partmap.FeedNow), then copies every profile with
// ListProfiles, and then follows the feed from that cursor. The feed's
// oldest retained change ("" as a cursor) is no starting point: a profile
// whose last change was trimmed would be missing. Changes made during the
// copy are applied again after it, which is harmless, since every change
// carries the whole record.
//
// # Caveats
//
//   - The projected table belongs to the projector: a rebuild truncates it,
//     and rows written by anyone else are overwritten or deleted.
//   - A profile copied by a (re)build whose record does not know its last
//     commit (written before partmap kept it in the record) has as
//     updated_at the time of the copy.
//   - PostgreSQL's jsonb cannot hold the character U+0000, which a partmap
//     profile may: it is projected as U+FFFD, and logged.
//   - Deadlines are not projected. A field whose deadline has passed leaves
//     the table when the directory's expiry sweeper removes it (that is a
//     change, OpExpired), not at the deadline.
//   - When the feed no longer holds the changes after the saved cursor
//     (the feed's retention), Project stops with ECURSOREXPIRED: the
//     projection must be rebuilt.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
)

// DefaultTable is the projected table unless Options.Table names another.
const DefaultTable = "customer_profiles"

// CursorTable holds each projection's cursor, keyed by the table's name.
const CursorTable = "partmap_projection"

// DefaultWait is how long one read of the feed waits for a change.
const DefaultWait = 30 * time.Second

// readGrace is how much longer than its wait a read of the feed may take,
// and writeTimeout how long one page's transaction may.
const (
	readGrace    = time.Minute
	writeTimeout = 2 * time.Minute
)

// Options configure a Projector. The zero value projects into DefaultTable.
type Options struct {
	// Table is the projected table: NAME or SCHEMA.NAME, created if
	// missing. It is quoted as given, so "Profiles" is not "profiles".
	Table string
	// Rebuild empties the table and copies every profile again before
	// following the feed: the way out of ECURSOREXPIRED.
	Rebuild bool
	// PageSize is how many changes one read of the feed (and so one
	// PostgreSQL transaction) takes at most; 0 means partmap.MaxChangesPage.
	PageSize int
	// Wait is how long one read of the feed waits for a change; 0 means
	// DefaultWait.
	Wait time.Duration
	// RetryBase and RetryMax bound the backoff after a transient failure
	// of the feed or of PostgreSQL; 0 means 100 ms and 10 s.
	RetryBase, RetryMax time.Duration
	// Logger receives a line when a failure starts being retried and one
	// when it ends, never one per attempt; nil means slog.Default().
	Logger *slog.Logger
	// OnProgress, if set, is called on Run's goroutine after each page is
	// committed, and during a copy after each batch of profiles.
	OnProgress func(Progress)
}

// Progress is where a projection stands.
type Progress struct {
	// Copying is true while a (re)build copies profiles; Copied counts
	// them.
	Copying bool
	Copied  int64
	// Changes counts the changes applied since Run started (before the
	// page's changes to one email were collapsed into its last).
	Changes int64
	// Cursor is the feed cursor committed with the last page.
	Cursor string
	// Time is the commit time, in partmap, of the last change applied;
	// zero before the first.
	Time time.Time
	// CaughtUp is true when the last page read of the feed was caught up
	// (partmap.ChangePage.CaughtUp): the projection was as new as the
	// feed then.
	CaughtUp bool
	// Lag is 0 when caught up, and otherwise how long ago the last change
	// applied was committed in partmap.
	Lag time.Duration
}

// Projector keeps one table equal to the directory behind a feed.
type Projector struct {
	feed  partmap.Feeder
	pool  *pgxpool.Pool
	opts  Options
	name  string // the table as given: its key in CursorTable
	table string // quoted

	mu       sync.Mutex
	progress Progress

	changes prometheus.Counter
	retries prometheus.Counter
	lag     prometheus.GaugeFunc
}

// Lister is what a copy reads profiles from: every partmap.Store is one.
type Lister interface {
	ListProfiles(ctx context.Context, opts partmap.ListOptions) (partmap.Page, error)
	FindProfiles(ctx context.Context, emails []string) ([]*partmap.Record, error)
}

// New checks the options and returns a projector of feed into pool's
// database. A feed that is not also a Lister can only resume a projection
// that exists.
func New(feed partmap.Feeder, pool *pgxpool.Pool, opts Options) (*Projector, error) {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	ident, err := ParseTable(opts.Table)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.PageSize == 0:
		opts.PageSize = partmap.MaxChangesPage
	case opts.PageSize < 0 || opts.PageSize > partmap.MaxChangesPage:
		return nil, partmap.Errorf(partmap.EINVALID, "page size must be 1 to %d, not %d", partmap.MaxChangesPage, opts.PageSize)
	}
	if opts.Wait == 0 {
		opts.Wait = DefaultWait
	}
	if opts.RetryBase == 0 {
		opts.RetryBase = 100 * time.Millisecond
	}
	if opts.RetryMax == 0 {
		opts.RetryMax = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p := &Projector{feed: feed, pool: pool, opts: opts, name: opts.Table, table: ident.Sanitize()}
	labels := prometheus.Labels{"table": p.name}
	p.changes = prometheus.NewCounter(prometheus.CounterOpts{Name: "partmap_projection_changes_total",
		Help: "Changes of the feed applied to the table (several changes to one profile in a page count each).", ConstLabels: labels})
	p.retries = prometheus.NewCounter(prometheus.CounterOpts{Name: "partmap_projection_retries_total",
		Help: "Transient failures of the feed or of PostgreSQL, each retried after a backoff.", ConstLabels: labels})
	p.lag = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "partmap_projection_lag_seconds",
		Help: "Now minus the partmap commit time of the last change applied; 0 when caught up with the feed.", ConstLabels: labels},
		func() float64 { return p.Progress().Lag.Seconds() })
	return p, nil
}

// Project runs a projector until ctx ends (nil) or a failure that retrying
// cannot mend (ECURSOREXPIRED among them).
func Project(ctx context.Context, feed partmap.Feeder, pool *pgxpool.Pool, opts Options) error {
	p, err := New(feed, pool, opts)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// Collectors returns the projector's Prometheus metrics:
// partmap_projection_lag_seconds, partmap_projection_changes_total and
// partmap_projection_retries_total, labelled with the table.
func (p *Projector) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.lag, p.changes, p.retries}
}

// Progress returns where the projection stands, its lag measured now.
func (p *Projector) Progress() Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.progress
	pr.Lag = 0
	if !pr.CaughtUp && !pr.Time.IsZero() {
		pr.Lag = max(0, time.Since(pr.Time))
	}
	return pr
}

func (p *Projector) report(update func(*Progress)) {
	p.mu.Lock()
	update(&p.progress)
	p.mu.Unlock()
	if p.opts.OnProgress != nil {
		p.opts.OnProgress(p.Progress())
	}
}

// Run projects until ctx ends, and then returns nil. It retries transient
// failures (the feed's server unreachable, PostgreSQL restarting) with
// backoff, from the cursor committed last; it returns the others.
func (p *Projector) Run(ctx context.Context) error {
	rebuild := p.opts.Rebuild
	var failing error // the failure being retried, if any
	var since time.Time
	attempt := 0
	healed := func() {
		if failing != nil {
			p.opts.Logger.Info("projection: recovered", "table", p.name, "after", time.Since(since).Round(time.Millisecond), "attempts", attempt)
			failing, attempt = nil, 0
		}
	}
	for {
		err := p.session(ctx, &rebuild, healed)
		if ctx.Err() != nil {
			return nil
		}
		if !transient(err) {
			return err
		}
		p.retries.Inc()
		// Not known to be caught up while failing: the lag grows from the
		// last change applied, so that an alert on it fires.
		p.mu.Lock()
		p.progress.CaughtUp = false
		p.mu.Unlock()
		if failing == nil {
			since = time.Now()
			p.opts.Logger.Warn("projection: failed; retrying with backoff until it works", "table", p.name, "err", err)
		}
		failing = err
		backoff := min(p.opts.RetryMax, p.opts.RetryBase<<min(attempt, 20))
		attempt++
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		}
	}
}

// session sets the schema up, copies when it must, and follows the feed
// until something fails.
func (p *Projector) session(ctx context.Context, rebuild *bool, healed func()) error {
	if err := p.setup(ctx); err != nil {
		return err
	}
	cursor, valid, err := p.savedCursor(ctx)
	if err != nil {
		return err
	}
	if *rebuild || !valid {
		if cursor, err = p.copyAll(ctx, !*rebuild); err != nil {
			return err
		}
		*rebuild = false
		healed()
	}
	// Healed only once the feed has answered too.
	return p.follow(ctx, cursor, healed)
}

// setup creates the tables that are missing. Two projectors starting
// at once would race in CREATE TABLE IF NOT EXISTS (a unique violation in
// the catalog): a transaction-scoped advisory lock takes turns.
func (p *Projector) setup(ctx context.Context) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('`+CursorTable+`'))`)
		if err == nil {
			_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+CursorTable+` (
				name text PRIMARY KEY, cursor text, change_time timestamptz, updated_at timestamptz NOT NULL DEFAULT now())`)
		}
		if err == nil {
			_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+p.table+` (
				email text PRIMARY KEY, profile jsonb NOT NULL, etag text NOT NULL, updated_at timestamptz NOT NULL)`)
		}
		return err
	})
}

// savedCursor reads the table's cursor; valid is false when there is none
// (a new projection) or it is NULL (a copy was interrupted).
func (p *Projector) savedCursor(ctx context.Context) (cursor string, valid bool, err error) {
	var c *string
	var t *time.Time
	err = p.pool.QueryRow(ctx, `SELECT cursor, change_time FROM `+CursorTable+` WHERE name = $1`, p.name).Scan(&c, &t)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && c == nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if t != nil {
		p.mu.Lock()
		p.progress.Time = *t
		p.mu.Unlock()
	}
	return *c, true, nil
}

// fetched is one read of the feed, and its rows.
type fetched struct {
	page partmap.ChangePage
	rows rows
	err  error
}

// follow applies the feed from cursor on. The next page is read, and
// encoded, while the last one is written.
func (p *Projector) follow(ctx context.Context, cursor string, healed func()) error {
	fctx, cancel := context.WithCancel(ctx)
	pages := make(chan fetched, 1)
	go func() {
		defer close(pages)
		after, wait := cursor, time.Duration(0)
		for {
			var f fetched
			// A read that outlasts its wait by far hangs on a connection
			// that died silently (a partition): it is abandoned, and retried.
			rctx, rcancel := context.WithTimeout(fctx, wait+readGrace)
			f.page, f.err = p.feed.Changes(rctx, partmap.ChangeQuery{After: after, Limit: p.opts.PageSize, Wait: wait})
			rcancel()
			// After a full page, the next read does not wait: should it
			// find the end, it says at once that the projection caught up.
			wait = p.opts.Wait
			if len(f.page.Changes) >= p.opts.PageSize {
				wait = 0
			}
			if f.err == nil {
				f.rows, f.err = p.collapse(f.page.Changes)
			}
			select {
			case pages <- f:
			case <-fctx.Done():
				return
			}
			if f.err != nil {
				return
			}
			after = f.page.Next
		}
	}()
	defer func() {
		cancel()
		for range pages {
		}
	}()
	for f := range pages {
		if f.err != nil {
			return p.feedError(f.err, cursor)
		}
		if len(f.page.Changes) > 0 || f.page.Next != cursor {
			if err := p.apply(ctx, cursor, f.page, f.rows); err != nil {
				return err
			}
		}
		cursor = f.page.Next
		healed()
		p.changes.Add(float64(len(f.page.Changes)))
		p.report(func(pr *Progress) {
			pr.Copying = false
			pr.Changes += int64(len(f.page.Changes))
			pr.Cursor = cursor
			if n := len(f.page.Changes); n > 0 {
				pr.Time = f.page.Changes[n-1].Time
			}
			pr.CaughtUp = f.page.CaughtUp
		})
	}
	return ctx.Err()
}

// feedError explains a failure to read the feed.
func (p *Projector) feedError(err error, cursor string) error {
	if partmap.ErrorCode(err) == partmap.ECURSOREXPIRED {
		return &partmap.Error{Code: partmap.ECURSOREXPIRED, Err: err, Message: fmt.Sprintf(
			"the change feed no longer holds the changes after cursor %s, which table %s has reached (the feed's retention): the projection must be rebuilt (partmap project --rebuild)", cursor, p.name)}
	}
	return err
}

// rows are the rows of one write, for COPY: email, profile (nil for a
// deletion), etag and updated_at.
type rows struct {
	copy    [][]any
	deletes bool
}

func (r *rows) add(logger *slog.Logger, email string, rec *partmap.Record, t time.Time) error {
	if rec == nil {
		r.copy = append(r.copy, []any{email, nil, nil, t})
		r.deletes = true
		return nil
	}
	js, err := profileJSON(rec.Profile)
	if err != nil {
		return permanent{fmt.Errorf("profile %s cannot be written as JSON: %w", email, err)}
	}
	if js.replaced {
		logger.Warn("projection: the profile holds U+0000, which jsonb cannot; projected as U+FFFD", "email", email)
	}
	r.copy = append(r.copy, []any{email, js.text, rec.Version.ETag(), t})
	return nil
}

// collapse keeps each email's last change of a page, in page order.
func (p *Projector) collapse(changes []partmap.Change) (rows, error) {
	last := make(map[string]int, len(changes))
	for i, c := range changes {
		last[c.Email] = i
	}
	r := rows{copy: make([][]any, 0, len(last))}
	for i, c := range changes {
		if last[c.Email] != i {
			continue
		}
		if err := r.add(p.opts.Logger, c.Email, c.Record, c.Time); err != nil {
			return rows{}, err
		}
	}
	return r, nil
}

// apply writes one page's rows and moves the cursor from from to
// page.Next, in one transaction.
func (p *Projector) apply(ctx context.Context, from string, page partmap.ChangePage, r rows) error {
	var lastTime *time.Time
	if n := len(page.Changes); n > 0 {
		lastTime = &page.Changes[n-1].Time
	}
	// A page takes well under a second; one that takes minutes hangs on
	// a connection that died silently, and is retried.
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		b, err := p.write(ctx, tx, r)
		if err != nil {
			return err
		}
		b.Queue(`UPDATE `+CursorTable+` SET cursor = $2, change_time = coalesce($3, change_time), updated_at = now()
			WHERE name = $1 AND cursor = $4`, p.name, page.Next, lastTime, from)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range b.Len() - 1 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return p.moved(from)
		}
		return br.Close()
	})
}

// errMoved is a cursor that moved under a transaction, which then wrote
// nothing: another projector writes the same table, or a commit of this
// one completed in PostgreSQL after the projector had given up on it (its
// context ended). Either way the session starts again from the cursor
// committed, and no change is applied twice.
type errMoved struct{ table, from string }

func (e errMoved) Error() string {
	return fmt.Sprintf("the cursor of table %s is no longer %s: another projector writes the same table (run one per table), or a commit outlived its client; resuming from the committed cursor", e.table, e.from)
}

func (p *Projector) moved(from string) error { return errMoved{p.name, from} }

// stage is where a transaction's rows are copied before they are merged:
// COPY, then one INSERT … ON CONFLICT, is about a third faster than
// arrays of parameters (unnest), and both beat a statement per row.
const stage = "pg_temp.partmap_stage"

// write copies r into the stage and returns the batch that merges it into
// the table, for the caller to add to and send in tx.
func (p *Projector) write(ctx context.Context, tx pgx.Tx, r rows) (*pgx.Batch, error) {
	b := &pgx.Batch{}
	if len(r.copy) == 0 {
		return b, nil
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS partmap_stage (email text, profile text, etag text, updated_at timestamptz)
		ON COMMIT DELETE ROWS`); err != nil {
		return nil, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", "partmap_stage"}, []string{"email", "profile", "etag", "updated_at"}, pgx.CopyFromRows(r.copy)); err != nil {
		return nil, err
	}
	if len(r.copy) > 0 {
		b.Queue(`INSERT INTO ` + p.table + ` AS t (email, profile, etag, updated_at)
			SELECT email, profile::jsonb, etag, updated_at FROM ` + stage + ` WHERE profile IS NOT NULL
			ON CONFLICT (email) DO UPDATE SET profile = excluded.profile, etag = excluded.etag, updated_at = excluded.updated_at`)
	}
	if r.deletes {
		b.Queue(`DELETE FROM ` + p.table + ` AS t USING ` + stage + ` AS s WHERE s.profile IS NULL AND t.email = s.email`)
	}
	return b, nil
}

// copyAll empties the table and copies every profile into it, and returns
// the cursor to follow the feed from: the feed's newest, taken before the
// copy. The cursor is NULL meanwhile, so that a copy cut short is started
// again, never followed.
func (p *Projector) copyAll(ctx context.Context, fresh bool) (string, error) {
	lister, ok := p.feed.(Lister)
	if !ok {
		return "", permanent{partmap.Errorf(partmap.EUNSUPPORTED, "table %s needs a full copy of the directory, and this feed cannot list profiles", p.name)}
	}
	why := "rebuilding: copying every profile"
	if fresh {
		why = "a new projection (or one whose copy was cut short): copying every profile"
	}
	p.opts.Logger.Info("projection: "+why, "table", p.name)
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+CursorTable+` (name, cursor, change_time, updated_at) VALUES ($1, NULL, NULL, now())
			ON CONFLICT (name) DO UPDATE SET cursor = NULL, change_time = NULL, updated_at = now()`, p.name)
		if err == nil {
			_, err = tx.Exec(ctx, `TRUNCATE `+p.table)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	now, err := p.feed.Changes(ctx, partmap.ChangeQuery{After: partmap.FeedNow})
	if err != nil {
		return "", err
	}
	start, copied := time.Now(), int64(0)
	p.report(func(pr *Progress) { *pr = Progress{Copying: true} })
	list := partmap.ListOptions{Limit: partmap.MaxPageLimit}
	for {
		page, err := lister.ListProfiles(ctx, list)
		if err != nil {
			return "", err
		}
		recs, err := withVersions(ctx, lister, page.Profiles)
		if err != nil {
			return "", err
		}
		var r rows
		for _, rec := range recs {
			// A row's updated_at is its profile's last commit, as a change
			// through the feed has it; the copy's own time only for a
			// record that does not know it (written before stores kept it).
			at := start
			if rec.Committed != 0 {
				at = time.UnixMilli(rec.Committed)
			}
			if err := r.add(p.opts.Logger, rec.Profile.Email(), rec, at); err != nil {
				return "", err
			}
		}
		err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			b, err := p.write(ctx, tx, r)
			if err == nil && b.Len() > 0 {
				err = tx.SendBatch(ctx, b).Close()
			}
			return err
		})
		if err != nil {
			return "", err
		}
		copied += int64(len(r.copy))
		p.report(func(pr *Progress) { pr.Copied = copied })
		if page.NextCursor == "" {
			break
		}
		list.Cursor = page.NextCursor
	}
	tag, err := p.pool.Exec(ctx, `UPDATE `+CursorTable+` SET cursor = $2, updated_at = now() WHERE name = $1 AND cursor IS NULL`, p.name, now.Next)
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() != 1 {
		return "", p.moved("NULL (copying)")
	}
	p.opts.Logger.Info("projection: copied; following the change feed", "table", p.name, "profiles", copied,
		"took", time.Since(start).Round(time.Millisecond), "cursor", now.Next)
	return now.Next, nil
}

// withVersions returns the records of a listed page with their versions
// and commit times: a list read over HTTP carries neither, and they are
// read again. A profile
// deleted meanwhile is left out: its deletion is in the feed.
func withVersions(ctx context.Context, l Lister, listed []partmap.Record) ([]*partmap.Record, error) {
	out := make([]*partmap.Record, 0, len(listed))
	var emails []string
	for i := range listed {
		if listed[i].Version == 0 {
			emails = append(emails, listed[i].Profile.Email())
			continue
		}
		out = append(out, &listed[i])
	}
	for len(emails) > 0 {
		n := min(len(emails), partmap.MaxBatchEmails)
		found, err := l.FindProfiles(ctx, emails[:n])
		if err != nil {
			return nil, err
		}
		for _, rec := range found {
			if rec != nil {
				out = append(out, rec)
			}
		}
		emails = emails[n:]
	}
	return out, nil
}

// ParseTable checks a table name, NAME or SCHEMA.NAME, and returns it as
// an identifier to quote.
func ParseTable(name string) (pgx.Identifier, error) {
	var parts pgx.Identifier
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			parts = append(parts, name[start:i])
			start = i + 1
		}
	}
	if len(parts) > 2 {
		return nil, partmap.Errorf(partmap.EINVALID, "table %q: name a table as NAME or SCHEMA.NAME", name)
	}
	for _, part := range parts {
		switch {
		case part == "":
			return nil, partmap.Errorf(partmap.EINVALID, "table %q: a name is empty", name)
		case len(part) > 63:
			return nil, partmap.Errorf(partmap.EINVALID, "table %q: %.20q… is longer than PostgreSQL's 63 bytes", name, part)
		case !utf8.ValidString(part):
			return nil, partmap.Errorf(partmap.EINVALID, "table %q is not valid UTF-8", name)
		}
		for _, c := range part {
			if c < 0x20 || c == 0x7f {
				return nil, partmap.Errorf(partmap.EINVALID, "table %q holds a control character", name)
			}
		}
	}
	return parts, nil
}

// permanent is a failure that retrying cannot mend.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// transient reports whether err may pass: the network, a server
// restarting, an overloaded one. Errors partmap classified, other than
// unavailability and internal failures, and PostgreSQL's errors other
// than those of connections, resources and operator intervention, are not.
func transient(err error) bool {
	var perm permanent
	var pe *partmap.Error
	var pg *pgconn.PgError
	switch {
	case err == nil || errors.As(err, &perm):
		return false
	case errors.As(err, new(errMoved)):
		return true
	case errors.As(err, &pe):
		switch partmap.ErrorCode(pe) {
		case partmap.EUNAVAILABLE, partmap.EINTERNAL, partmap.ELOCKCONFLICT, partmap.ENOTSTARTED, partmap.ETIMEOUT:
			return true
		}
		return false
	case errors.As(err, &pg):
		switch pg.Code[:2] {
		case "08", "40", "53", "57", "58": // connection, rollback, resources, operator, system
			return true
		}
		return pg.Code == "55P03" || pg.Code == "55006" // lock not available, object in use
	}
	return true // the network, a connection cut
}
