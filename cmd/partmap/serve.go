package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/pebble"
)

type serveConfig struct {
	addr            string
	data            string
	lockWait        time.Duration
	logFormat       string
	logLevel        string
	shutdownTimeout time.Duration
}

func (c serveConfig) Validate() error {
	if c.data == "" {
		return usagef("--data must name a directory")
	}
	if c.lockWait < 0 {
		return usagef("--lock-wait must not be negative")
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return usagef("--log-format must be text or json, not %q", c.logFormat)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return usagef("--log-level must be debug, info, warn or error, not %q", c.logLevel)
	}
	return nil
}

func runServe(ctx context.Context, e *env, args []string) error {
	var c serveConfig
	fs := newFlagSet(e, "serve", "")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "`address` to listen on (port 0 picks a free port)")
	fs.StringVar(&c.data, "data", "./partmap-data", "`directory` of the embedded Pebble store; created if missing")
	fs.DurationVar(&c.lockWait, "lock-wait", directory.DefaultLockWait, "how long a write waits for a locked partition before a lock-conflict error (0 fails at once)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may run after SIGINT or SIGTERM")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("serve takes no arguments, got %q", rest)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	log := newLogger(e, c)

	// Listen first: a busy port should not leave a new, empty store behind.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	lockWait := c.lockWait
	if lockWait == 0 {
		lockWait = -1 // pebble.Options: negative fails fast, 0 means the default
	}
	store, err := pebble.Open(c.data, &pebble.Options{LockWait: lockWait})
	if err != nil {
		return err
	}
	defer store.Close()
	srv := &http.Server{
		Handler:           pmhttp.NewServer(store, &pmhttp.ServerOptions{Logger: log}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving", "addr", "http://"+ln.Addr().String(), "data", c.data, "lockWait", c.lockWait)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", c.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	log.Info("stopped cleanly")
	return nil
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
