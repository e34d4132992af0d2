package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
	"github.com/partmap/partmap/resp"
)

type serveConfig struct {
	addr          string
	respAddr      string // --resp-addr: "" serves no Redis protocol
	data          string
	dataSet       bool // --data was given
	store         string
	replicaAcks   int
	lockWait      time.Duration
	commitDelay   time.Duration
	siblings      int
	recordCacheMB int
	sweepInterval time.Duration
	feedRetention partmap.Retention
	indexes       string // --index: "" keeps the directory's (or the default), "none" or a comma list
	namespace     string // --redis-namespace
	logFormat     string
	logLevel      string

	authFile        string
	insecure        bool
	tlsCert, tlsKey string
	serve           pmhttp.ServeOptions // timeouts
}

func (c serveConfig) Validate() error {
	if c.data == "" {
		return usagef("--data must name a directory")
	}
	if c.namespace != "" && !strings.HasPrefix(c.store, "redis") {
		return usagef("--redis-namespace needs a redis:// or redis-cluster:// --store")
	}
	if strings.ContainsAny(c.namespace, ":{}") {
		return usagef("--redis-namespace must not contain ':', '{' or '}'")
	}
	if c.replicaAcks < 0 || (c.replicaAcks > 0 && !strings.HasPrefix(c.store, "redis")) {
		return usagef("--redis-min-replicas-ack needs a redis:// or redis-cluster:// --store and a count of 0 or more")
	}
	if c.store != "" && c.dataSet {
		return usagef("give --store or --data, not both")
	}
	if c.lockWait < 0 {
		return usagef("--lock-wait must not be negative")
	}
	if c.commitDelay < 0 || c.commitDelay > time.Second {
		return usagef("--commit-delay must be between 0 and 1s, not %v", c.commitDelay)
	}
	if c.siblings < 0 {
		return usagef("--commit-siblings must not be negative")
	}
	if c.recordCacheMB < 0 || c.recordCacheMB > 1<<16 {
		return usagef("--record-cache must be between 0 and 65536 MB, not %d", c.recordCacheMB)
	}
	if c.sweepInterval < time.Millisecond || c.sweepInterval > time.Hour {
		return usagef("--sweep-interval must be between 1ms and 1h, not %v", c.sweepInterval)
	}
	if err := partmap.CheckIndexes(c.indexList()); err != nil {
		return usagef("--index: %s", partmap.ErrorMessage(err))
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return usagef("--log-format must be text or json, not %q", c.logFormat)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return usagef("--log-level must be debug, info, warn or error, not %q", c.logLevel)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	for name, d := range map[string]time.Duration{"--read-header-timeout": c.serve.ReadHeaderTimeout, "--read-timeout": c.serve.ReadTimeout,
		"--write-timeout": c.serve.WriteTimeout, "--idle-timeout": c.serve.IdleTimeout} {
		if d <= 0 {
			return usagef("%s must be positive", name)
		}
	}
	for _, addr := range []string{c.addr, c.respAddr} {
		if addr != "" && c.authFile == "" && !c.insecure && !pmhttp.IsLoopback(addr) {
			return usagef("refusing to serve %s without --auth-file: anyone who can reach it could read and change every profile. "+
				"Give --auth-file (see `partmap token`), listen on a loopback address, or pass --insecure if the network is trusted", addr)
		}
	}
	return nil
}

// storeOptions maps the flags to the store's options.
func (c serveConfig) storeOptions() *pebble.Options {
	return &pebble.Options{DirectoryOptions: c.directoryOptions(), CommitDelay: negativeIfZero(c.commitDelay),
		CommitSiblings: negativeIfZero(c.siblings), RecordCacheBytes: c.recordCacheBytes()}
}

// directoryOptions maps the flags that every store takes.
func (c serveConfig) directoryOptions() partmap.DirectoryOptions {
	return partmap.DirectoryOptions{LockWait: negativeIfZero(c.lockWait), Indexes: c.indexList(), SweepInterval: c.sweepInterval,
		FeedRetention: &c.feedRetention}
}

// recordCacheBytes reads --record-cache: 0 is no cache.
func (c serveConfig) recordCacheBytes() int64 { return negativeIfZero(int64(c.recordCacheMB) << 20) }

// negativeIfZero maps a flag's 0, which says none or at once, to the way
// options say it: there 0 means the default.
func negativeIfZero[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// indexList reads --index: nil leaves the choice to the directory.
func (c serveConfig) indexList() []string {
	switch c.indexes {
	case "":
		return nil
	case "none":
		return []string{}
	}
	return strings.Split(c.indexes, ",")
}

func runServe(ctx context.Context, e *env, args []string) error {
	var c serveConfig
	fs := newFlagSet(e, "serve", "")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "`address` to listen on (port 0 picks a free port)")
	fs.StringVar(&c.respAddr, "resp-addr", "", "also serve the Redis protocol (RESP2 and RESP3) on this `address`, for redis-cli and Redis clients; off unless given. The same TLS, tokens and loopback rule apply")
	fs.StringVar(&c.data, "data", "./partmap-data", "`directory` of the embedded Pebble store; created if missing")
	fs.StringVar(&c.store, "store", "", "the store as a `URL`: pebble://DIR (the default, as --data DIR), redis://HOST:PORT[/DB] or redis-cluster://HOST:PORT[,HOST:PORT...]")
	fs.IntVar(&c.replicaAcks, "redis-min-replicas-ack", 0, "with a Redis store, make each commit WAIT for `N` replica acknowledgements (0: do not wait)")
	fs.StringVar(&c.namespace, "redis-namespace", "", "keep this directory's keys under `NS`, so that several directories can share one Redis")
	fs.StringVar(&c.indexes, "index", "", "comma-separated `fields` a new directory indexes for search, or none (default companyName,customerTier); an existing directory keeps its own")
	fs.DurationVar(&c.lockWait, "lock-wait", partmap.DefaultLockWait, "how long a write waits for a locked partition before a lock-conflict error (0 fails at once)")
	fs.DurationVar(&c.commitDelay, "commit-delay", pebble.DefaultCommitDelay, "while more than --commit-siblings writes wait for an fsync, hold the next one back this long after the last, so that they share it; a lone writer never waits (0 syncs at once)")
	fs.IntVar(&c.siblings, "commit-siblings", pebble.DefaultCommitSiblings, "how many writes must be waiting for an fsync before --commit-delay applies")
	fs.IntVar(&c.recordCacheMB, "record-cache", pebble.DefaultRecordCacheBytes>>20, "`MB` of the embedded store's cache of records, which answers lookups of one profile without reading Pebble (0: none); the Go heap's soft limit grows by 1.5 times as much")
	fs.DurationVar(&c.sweepInterval, "sweep-interval", partmap.DefaultSweepInterval, "how often the sweeper reclaims expired profiles and fields (they are invisible from their deadline on, swept or not)")
	c.feedRetention = partmap.DefaultRetention
	fs.Func("feed-retention", "how long the change feed keeps changes, how many, or both: `DURATION,COUNT` such as 24h, 7d, 1000000 or 24h,1000000; none keeps all (default "+partmap.DefaultRetention.String()+")", func(s string) error {
		r, err := partmap.ParseRetention(s)
		c.feedRetention = r
		return err
	})
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.serve.ShutdownTimeout, "shutdown-timeout", pmhttp.DefaultServeOptions.ShutdownTimeout, "how long in-flight requests may run after SIGINT or SIGTERM")
	fs.StringVar(&c.authFile, "auth-file", "", "`file` of bearer tokens to require (see `partmap token`); without it every request is allowed")
	fs.BoolVar(&c.insecure, "insecure", false, "allow serving a non-loopback address without --auth-file")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate `file`: serve HTTPS (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key `file` of --tls-cert")
	fs.DurationVar(&c.serve.ReadHeaderTimeout, "read-header-timeout", pmhttp.DefaultServeOptions.ReadHeaderTimeout, "how long a client may take to send a request's headers")
	fs.DurationVar(&c.serve.ReadTimeout, "read-timeout", pmhttp.DefaultServeOptions.ReadTimeout, "how long a client may take to send a whole request")
	fs.DurationVar(&c.serve.WriteTimeout, "write-timeout", pmhttp.DefaultServeOptions.WriteTimeout, "how long writing a response may take")
	fs.DurationVar(&c.serve.IdleTimeout, "idle-timeout", pmhttp.DefaultServeOptions.IdleTimeout, "how long an idle keep-alive connection stays open")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("serve takes no arguments, got %q", rest)
	}
	c.dataSet = flagGiven(fs, "data")
	if err := c.Validate(); err != nil {
		return err
	}
	log := newLogger(e, c)
	if strings.HasPrefix(c.store, "redis") {
		tuneGC(0) // the record cache is the embedded store's
	} else {
		tuneGC(max(c.recordCacheBytes(), 0))
	}
	var tokens *auth.Tokens
	if c.authFile != "" {
		if tokens, err = auth.LoadTokens(c.authFile); err != nil {
			return err
		}
	}

	// Listen first: a busy port should not leave a new, empty store behind.
	ln, err := pmhttp.Listen(c.addr, c.tlsCert, c.tlsKey)
	if err != nil {
		return err
	}
	defer ln.Close()
	var respLn net.Listener
	if c.respAddr != "" {
		if respLn, err = pmhttp.Listen(c.respAddr, c.tlsCert, c.tlsKey); err != nil {
			return fmt.Errorf("--resp-addr: %w", err)
		}
		defer respLn.Close()
	}
	store, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer store.Close()
	srv := pmhttp.NewServer(store, &pmhttp.ServerOptions{Logger: log, Tokens: tokens, GroupWrites: c.store == ""})
	var rs *resp.Server
	if respLn != nil {
		// The event loop makes one store call at a time: for the embedded
		// store, not for one a network away.
		rs = resp.New(store, &resp.Options{Tokens: tokens, Log: log, EventLoop: c.store == ""})
		go rs.Serve(respLn)
		log.Info("serving the Redis protocol", "addr", respLn.Addr().String())
	}
	scheme := "http"
	if c.tlsCert != "" {
		scheme = "https"
	}
	where := c.store
	if where == "" {
		where = "pebble://" + c.data
	}
	log.Info("serving", "addr", scheme+"://"+ln.Addr().String(), "store", where, "lockWait", c.lockWait, "auth", tokens != nil)
	if tokens != nil && scheme == "http" && !pmhttp.IsLoopback(c.addr) {
		log.Warn("bearer tokens will cross the network in clear text; serve HTTPS with --tls-cert and --tls-key")
	}

	c.serve.ShutdownTimeout = negativeIfZero(c.serve.ShutdownTimeout) // waits for none
	err = srv.Serve(ctx, ln, &c.serve)
	if rs != nil {
		rs.Close() // before the store closes
	}
	if err != nil {
		return err
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	log.Info("stopped cleanly")
	return nil
}

// tuneGC sets the collector's pace and its soft memory limit (gcSettings),
// unless GOGC or GOMEMLIMIT say otherwise.
func tuneGC(recordCache int64) {
	percent, limit := gcSettings(recordCache)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
}

// gcSettings is GOGC and the soft memory limit for a record cache of
// recordCache bytes (0: none).
//
// Without a record cache the live heap of a serving directory is small
// (Pebble's memtables and block cache are C memory), and GOGC=200 keeps
// the default from collecting several times a second under load. The
// cache is Go heap that the collector does not scan: its ring, and an
// index of its entries that grows with their count (to about half the
// ring once an import has filled it with small profiles). With it the
// live heap is never small, and Go's default GOGC=100 leaves as much
// headroom without tripling the ring.
//
// The limit only bounds the heap: it must sit above the heaviest working
// set, or the collector runs back to back, held at half the CPU by the
// runtime's limiter. An import is that working set: two bulk requests of
// 10,000 profiles in flight hold about 20 MB live beside the cache, and
// the 40 MiB limit this replaced made it collect 250 times for 200,000
// profiles instead of 45, at three times the server's CPU (issue 32,
// docs/PERFORMANCE.md). 80 MiB holds that working set and the rest of
// the live heap, with about as much again to collect in.
func gcSettings(recordCache int64) (percent int, limit int64) {
	percent = 200
	if recordCache > 0 {
		percent = 100
	}
	return percent, 80<<20 + recordCache + recordCache/2
}

func newLogger(e *env, c serveConfig) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.logLevel))
	opts := &slog.HandlerOptions{Level: level}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(e.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(e.stderr, opts))
}
