//go:build !linux

package resp

import "net"

// loop is Linux's (loop_linux.go); elsewhere every client has a goroutine.
type loop struct{}

func newLoop(*Server, net.Listener) (*loop, error) { return nil, nil }
func (*loop) serve() error                         { return net.ErrClosed }
func (*loop) stop()                                {}
func (*loop) close()                               {}
