package http

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// MaxHeaderBytes bounds a request's headers; larger ones get 431.
const MaxHeaderBytes = 64 << 10

// ServeOptions configure Serve. A nil *ServeOptions, like a zero field,
// means DefaultServeOptions' value; a negative one means no limit.
type ServeOptions struct {
	// The connection timeouts of net/http's Server.
	ReadHeaderTimeout time.Duration // for a request's headers
	ReadTimeout       time.Duration // for a whole request
	WriteTimeout      time.Duration // for writing a response
	IdleTimeout       time.Duration // for an idle keep-alive connection
	// ShutdownTimeout is how long requests in flight may go on once
	// Serve's context is done; a negative one waits for none of them.
	ShutdownTimeout time.Duration
}

// DefaultServeOptions are what the zero fields of ServeOptions mean.
var DefaultServeOptions = ServeOptions{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
	WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, ShutdownTimeout: 30 * time.Second}

// Listen listens on addr (port 0 picks a free port). With a certFile and
// keyFile, both PEM, it serves TLS 1.2 or later.
func Listen(addr, certFile, keyFile string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || certFile == "" {
		return ln, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// Serve serves s on ln until ctx is done. Then it stops accepting, lets the
// requests in flight finish for up to opts.ShutdownTimeout, and returns nil,
// or an error if some did not finish. It closes ln. The server's own
// complaints (a TLS handshake that failed, say) go to the logger as
// warnings.
func (s *Server) Serve(ctx context.Context, ln net.Listener, opts *ServeOptions) error {
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	d := DefaultServeOptions // net/http's Server takes a negative timeout as none
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cmp.Or(o.ReadHeaderTimeout, d.ReadHeaderTimeout),
		ReadTimeout:       cmp.Or(o.ReadTimeout, d.ReadTimeout),
		WriteTimeout:      cmp.Or(o.WriteTimeout, d.WriteTimeout),
		IdleTimeout:       cmp.Or(o.IdleTimeout, d.IdleTimeout),
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(s.stopFeeds)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown := max(cmp.Or(o.ShutdownTimeout, d.ShutdownTimeout), 0)
	s.log.Info("shutting down: finishing in-flight requests", "timeout", shutdown)
	sctx, cancel := context.WithTimeout(context.Background(), shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// IsLoopback reports whether a server listening on addr, HOST:PORT, only
// accepts connections from this machine.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
