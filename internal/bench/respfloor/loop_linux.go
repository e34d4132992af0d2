//go:build linux

package main

import (
	"errors"
	"net"
	"strings"

	"github.com/tidwall/redcon"
	"golang.org/x/sys/unix"
)

// serveLoop is Redis's own server in Go: one thread waits on epoll for
// every client, runs the commands of all that are ready, makes their
// writes durable at once (one fsync), and only then writes their
// replies. No goroutine per client, no wake-up per write. Commands are
// parsed with redcon's parser.
func serveLoop(ln net.Listener, st loopStore) error {
	defer ln.Close()
	lf, err := ln.(*net.TCPListener).File() // a duplicate, kept open by the defer below
	if err != nil {
		return err
	}
	defer lf.Close()
	lfd := int(lf.Fd())
	if err := unix.SetNonblock(lfd, true); err != nil {
		return err
	}
	ep, err := unix.EpollCreate1(0)
	if err != nil {
		return err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}); err != nil {
		return err
	}
	type client struct {
		fd       int
		in, out  []byte
		touched  bool
		watchOut bool // EPOLLOUT is on: a reply waits for room
	}
	clients := map[int]*client{}
	events := make([]unix.EpollEvent, 512)
	buf := make([]byte, 64<<10)
	var args [][]byte
	var ready []*client
	drop := func(c *client) {
		unix.Close(c.fd)
		delete(clients, c.fd)
	}
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		ready = ready[:0]
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == lfd {
				for {
					cfd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
					if err != nil {
						break
					}
					unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
					clients[cfd] = &client{fd: cfd}
					unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, cfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(cfd)})
				}
				continue
			}
			c := clients[fd]
			if c == nil {
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 && len(c.out) > 0 {
				c.touched = true
				ready = append(ready, c)
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
				continue
			}
			m, err := unix.Read(fd, buf)
			if m <= 0 {
				if err != unix.EAGAIN {
					drop(c)
				}
				continue
			}
			c.in = append(c.in, buf[:m]...)
			for {
				complete, a, _, rest, err := redcon.ReadNextCommand(c.in, args)
				if err != nil {
					drop(c)
					break
				}
				if !complete {
					break
				}
				args = a
				c.out = run(st, c.out, a)
				c.in = rest
			}
			if len(c.in) == 0 {
				c.in = nil
			}
			if !c.touched && len(c.out) > 0 {
				c.touched = true
				ready = append(ready, c)
			}
		}
		if err := st.flush(); err != nil {
			return err
		}
		for _, c := range ready {
			c.touched = false
			if _, ok := clients[c.fd]; !ok {
				continue
			}
			m, err := unix.Write(c.fd, c.out)
			if m > 0 {
				c.out = c.out[m:]
			}
			if err != nil && err != unix.EAGAIN {
				drop(c)
				continue
			}
			if pending := len(c.out) > 0; pending != c.watchOut { // a system call only when the interest changes
				want := uint32(unix.EPOLLIN)
				if pending {
					want |= unix.EPOLLOUT
				}
				unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: want, Fd: int32(c.fd)})
				c.watchOut = pending
			}
		}
	}
}

// run executes one command, appending its reply to out.
func run(st loopStore, out []byte, args [][]byte) []byte {
	switch name := string(args[0]); {
	case strings.EqualFold(name, "HSET") && len(args) == 4:
		return redcon.AppendInt(out, int64(st.hset(args[1], args[2], args[3])))
	case strings.EqualFold(name, "HGET") && len(args) == 3:
		v, ok := st.hget(args[1], args[2])
		if !ok {
			return redcon.AppendNull(out)
		}
		return redcon.AppendBulk(out, v)
	case strings.EqualFold(name, "PING"):
		return redcon.AppendString(out, "PONG")
	case strings.EqualFold(name, "CONFIG"):
		return redcon.AppendArray(out, 0)
	default:
		return redcon.AppendError(out, "ERR unknown command or wrong number of arguments")
	}
}
