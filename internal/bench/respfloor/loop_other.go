//go:build !linux

package main

import (
	"errors"
	"net"
)

func serveLoop(net.Listener, loopStore) error {
	return errors.New("the event loop needs Linux's epoll")
}
