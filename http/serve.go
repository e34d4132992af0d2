package http

import (
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

// ServeOptions configure Serve. A nil *ServeOptions means zero options.
type ServeOptions struct {
	// The connection timeouts of net/http's Server; 0 means no limit.
	ReadHeaderTimeout time.Duration // for a request's headers
	ReadTimeout       time.Duration // for a whole request
	WriteTimeout      time.Duration // for writing a response
	IdleTimeout       time.Duration // for an idle keep-alive connection
	// ShutdownTimeout is how long requests in flight may go on once
	// Serve's context is done; 0 waits for none of them.
	ShutdownTimeout time.Duration
}

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
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
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
	s.log.Info("shutting down: finishing in-flight requests", "timeout", o.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
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
