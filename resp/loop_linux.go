//go:build linux

package resp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"golang.org/x/sys/unix"

	"github.com/partmap/partmap"
)

// The event loop serves a listener's clients as Redis does: one goroutine
// waits on epoll for all of them and works in turns. A turn reads every
// client that is ready, runs the whole commands each has sent, their
// writes of single profiles grouped across clients into one transaction
// (as a pipeline's are, pipeline.go), and hands the turn's wait for
// durability to a syncer goroutine. The turn's replies are sent only once
// that wait has ended; meanwhile the loop reads and runs the next turn,
// whose writes join the next fsync. Turns end in order, so a reply never
// leaves before the sync of a write it may have read. A lone client waits
// for one sync, as on the goroutine-per-client path.
//
// The loop never waits for a locked partition: a command of profiles that
// meets one wrote nothing, and waits, with the rest of its client's
// commands, to be run again in a later turn, for up to retryTime, while
// the other clients go on. Commands of several calls to the store (EXEC,
// FLUSHALL, SCAN, a DEL of over 100 keys …) run as on the other path,
// retrying in place, and hold the loop meanwhile, as a slow command holds
// Redis.
//
// It keeps the other path's bounds: a client may leave at most MaxPending
// bytes of an unfinished command (the framer's, as limitConn), for at
// most the command timeout; a client that does not read its replies is
// hung up on after the write timeout, and is not read (its commands wait)
// while more than maxBacklog bytes of them wait. It serves plain TCP and
// unix sockets; a TLS listener stays on redcon.

const (
	// maxBacklog bounds the replies a client leaves unread before its
	// commands wait.
	maxBacklog = 1 << 20
	// maxTurnCommands bounds the commands of one client in one turn, so
	// that a long pipeline does not hold the others.
	maxTurnCommands = 1024
)

var errNoWholeCommand = errors.New("resp: no whole command left")

type loop struct {
	s       *Server
	lf      *os.File // the listener's descriptor, a duplicate
	lfd, ep int
	wake    int // an eventfd: the syncer's and Close's
	tcp     bool
	clients map[int]*lclient
	buf     []byte // what read reads into
	stopped atomic.Bool
	done    chan struct{}

	now        time.Time
	lastSweep  time.Time
	sweepEvery time.Duration // a second, or less under short timeouts
	turnCtx    context.Context
	runnable   []*lclient // clients with commands to run in the next turn
	running    []*lclient
	group      loopGroup

	syncs    chan *turn
	inFlight int // turns handed to the syncer and not back
	mu       sync.Mutex
	synced   []*turn // back from the syncer, in order
}

// turn is the replies of one turn, and the wait that must end before they
// are sent.
type turn struct {
	wait    func() error
	err     error
	touched []touch
}

// touch says a client's replies up to end (in bytes ever replied) came
// from a turn.
type touch struct {
	c   *lclient
	end int64
}

// lclient is a client of the loop.
type lclient struct {
	fd   int
	cl   *client
	conn loopConn
	rd   *redcon.Reader
	framing
	in    []byte // read and not yet parsed: its first ready bytes end where a command does
	ready int
	// rdBuffered: rd may hold whole commands it has not returned yet
	rdBuffered bool
	cmds       []redcon.Command // parsed, not yet run
	fail       string           // a protocol error to answer once cmds have run

	out        []byte // replies not yet sent
	sent       int64  // bytes of replies sent, ever
	sendable   int64  // replies up to this offset are durable
	replied    int64  // replies up to this offset belong to a turn
	stalled    time.Time
	retrySince time.Time // its first command waits for a locked partition since
	blocked    bool      // in this turn
	pushback   []redcon.Command
	queued     bool // in runnable
	hangUp     bool // once its replies are sent: QUIT, a protocol error, its end of input
	gone       bool
	interest   uint32
}

// loopConn is the redcon.Conn the command layer writes a loop client's
// replies to: they gather in a redcon.Writer, flushed into out.
type loopConn struct {
	*redcon.Writer
	lc *lclient
}

func (c *loopConn) RemoteAddr() string          { return c.lc.cl.addr }
func (c *loopConn) Close() error                { c.lc.hangUp = true; return nil }
func (c *loopConn) Context() any                { return c.lc.cl }
func (c *loopConn) SetContext(any)              {}
func (c *loopConn) SetReadBuffer(int)           {}
func (c *loopConn) Detach() redcon.DetachedConn { return nil }
func (c *loopConn) NetConn() net.Conn           { return nil }
func (c *loopConn) PeekPipeline() []redcon.Command {
	if len(c.lc.cmds) < 2 {
		return nil
	}
	return c.lc.cmds[1:]
}

// ReadPipeline is QUIT's: what the client sent after the command running
// is dropped.
func (c *loopConn) ReadPipeline() []redcon.Command {
	lc := c.lc
	rest := c.PeekPipeline()
	if len(lc.cmds) > 0 {
		lc.cmds = lc.cmds[:1]
	}
	lc.in, lc.ready, lc.fail = nil, 0, ""
	return rest
}

// Write takes the Writer's flushed replies.
func (lc *lclient) Write(b []byte) (int, error) {
	lc.out = append(lc.out, b...)
	return len(b), nil
}

// Read gives the redcon.Reader whole commands only (see limitConn).
func (lc *lclient) Read(b []byte) (int, error) {
	if lc.ready == 0 {
		return 0, errNoWholeCommand
	}
	n := copy(b, lc.in[:lc.ready])
	lc.ready -= n
	lc.in = lc.in[:copy(lc.in, lc.in[n:])] // mostly nothing to move: whole commands are read whole
	if cap(lc.in) > 64<<10 && len(lc.in) == 0 {
		lc.in = nil // a large command's buffer goes with it
	}
	return n, nil
}

// newLoop returns a loop for ln, or nil when ln is not a plain TCP or
// unix listener.
func newLoop(s *Server, ln net.Listener) (*loop, error) {
	var f *os.File
	var err error
	l := &loop{s: s, clients: map[int]*lclient{}, buf: make([]byte, 64<<10), sweepEvery: min(time.Second, s.cmdTimeout/4, s.writeTimeout/4), done: make(chan struct{}), syncs: make(chan *turn, 1024), group: loopGroup{profiles: map[string]bool{}}}
	switch ln := ln.(type) {
	case *net.TCPListener:
		f, err = ln.File()
		l.tcp = true
	case *net.UnixListener:
		f, err = ln.File()
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.lf, l.lfd = f, int(f.Fd())
	fail := func(err error) (*loop, error) {
		l.close()
		return nil, err
	}
	if err := unix.SetNonblock(l.lfd, true); err != nil {
		return fail(err)
	}
	if l.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fail(err)
	}
	if l.wake, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fail(err)
	}
	for _, fd := range []int{l.lfd, l.wake} {
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return fail(err)
		}
	}
	return l, nil
}

func (l *loop) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fd := range []int{l.ep, l.wake} {
		if fd > 0 {
			unix.Close(fd)
		}
	}
	l.ep, l.wake = -1, -1
	l.lf.Close()
}

// stop makes serve return and waits for it; it may be called from any
// goroutine, more than once.
func (l *loop) stop() {
	l.stopped.Store(true)
	l.signal()
	<-l.done
}

// signal wakes the loop; once it is closed, its eventfd's number may be
// another file's, so signal does nothing.
func (l *loop) signal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake > 0 {
		one := [8]byte{1}
		unix.Write(l.wake, one[:])
	}
}

// serve runs the loop until stop.
func (l *loop) serve() error {
	defer close(l.done)
	defer l.close()
	syncerDone := make(chan struct{})
	go l.syncer(syncerDone)
	defer func() {
		close(l.syncs)
		<-syncerDone
		for _, lc := range l.clients {
			l.drop(lc)
		}
	}()
	events := make([]unix.EpollEvent, 256)
	l.lastSweep = time.Now()
	for {
		timeout := -1
		switch {
		case len(l.runnable) > 0 && !l.allBlocked():
			timeout = 0
		case len(l.runnable) > 0:
			timeout = 1 // a locked partition's commands: try again soon
		case len(l.clients) > 0:
			timeout = int(l.sweepEvery / time.Millisecond)
		}
		n, err := unix.EpollWait(l.ep, events, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if l.stopped.Load() {
			return net.ErrClosed
		}
		l.now = time.Now()
		for _, ev := range events[:max(n, 0)] {
			switch fd := int(ev.Fd); fd {
			case l.lfd:
				l.accept()
			case l.wake:
				var b [8]byte
				unix.Read(l.wake, b[:])
			default:
				lc := l.clients[fd]
				if lc == nil {
					continue
				}
				if ev.Events&unix.EPOLLOUT != 0 {
					l.send(lc)
				}
				if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 && !lc.gone {
					l.read(lc)
				}
			}
		}
		l.release()
		l.turn()
		if l.now.Sub(l.lastSweep) >= l.sweepEvery {
			l.sweep()
		}
	}
}

func (l *loop) allBlocked() bool {
	for _, lc := range l.runnable {
		if lc.retrySince.IsZero() {
			return false
		}
	}
	return true
}

func (l *loop) accept() {
	for {
		fd, sa, err := unix.Accept4(l.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.ECONNABORTED) {
				l.s.log.Error("resp: accept", "err", err)
			}
			return
		}
		if l.tcp {
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		}
		c := l.s.newClient(sockaddr(sa))
		lc := &lclient{fd: fd, cl: c}
		lc.conn = loopConn{Writer: redcon.NewWriter(lc), lc: lc}
		lc.rd = redcon.NewReader(lc)
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			unix.Close(fd)
			continue
		}
		lc.interest = unix.EPOLLIN
		l.clients[fd] = lc
		l.s.loopClients.Add(1)
	}
}

func sockaddr(sa unix.Sockaddr) string {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)).String()
	case *unix.SockaddrUnix:
		return sa.Name
	}
	return ""
}

// read takes what lc sent, and parses the whole commands in it.
func (l *loop) read(lc *lclient) {
	if lc.hangUp {
		l.drop(lc) // input after its end, or a hang-up while its replies wait
		return
	}
	left := MaxPending - lc.frame.partial
	k := int(min(int64(len(l.buf)), left+1)) // one byte past the bound fails the scan
	n, err := unix.Read(lc.fd, l.buf[:k])
	switch {
	case n > 0:
		have := len(lc.in)
		lc.in = append(lc.in, l.buf[:n]...)
		whole := lc.scan(lc.in[have:])
		if lc.frame.err != nil {
			l.drop(lc) // as on the other path: no reply to what was refused
			return
		}
		if whole > 0 {
			lc.ready = have + whole
		}
		if lc.frame.partial == 0 {
			lc.begun = time.Time{}
		} else if lc.begun.IsZero() {
			lc.begun = l.now
		}
	case n == 0 && err == nil:
		// The client's end of input: run what it sent, reply, and hang up.
		lc.hangUp = true
		l.interest(lc)
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		return
	default:
		l.drop(lc)
		return
	}
	for lc.ready > 0 || lc.rdBuffered {
		cmds, err := lc.rd.ReadCommands()
		lc.cmds = append(lc.cmds, cmds...)
		lc.rdBuffered = err == nil // the reader may hold more whole commands
		if err != nil && err != errNoWholeCommand {
			lc.fail = "ERR " + err.Error() // redcon's reply to a protocol error
			lc.in, lc.ready = nil, 0
			lc.hangUp = true
		}
	}
	if len(lc.cmds) > 0 || lc.fail != "" || lc.hangUp {
		l.queue(lc)
	}
	l.interest(lc)
}

func (l *loop) queue(lc *lclient) {
	if !lc.queued {
		lc.queued = true
		l.runnable = append(l.runnable, lc)
	}
}

// turn runs the commands of every runnable client, and hands the wait
// for their writes' durability to the syncer; their replies go once it
// has ended (release).
func (l *loop) turn() {
	if len(l.runnable) == 0 {
		return
	}
	l.running, l.runnable = l.runnable, l.running[:0]
	defer clear(l.running)
	ctx, wait := partmap.DeferDurability(l.s.base)
	l.turnCtx = ctx
	for _, lc := range l.running {
		lc.queued, lc.blocked = false, false
		if !lc.gone {
			l.runClient(lc)
		}
	}
	l.flushGroup()
	t := &turn{}
	for _, lc := range l.running {
		if lc.gone {
			continue
		}
		if lc.fail != "" && len(lc.cmds) == 0 {
			lc.conn.WriteError(lc.fail)
			lc.fail = ""
		}
		lc.conn.Flush()
		if end := lc.sent + int64(len(lc.out)); end > lc.replied {
			lc.replied = end
			t.touched = append(t.touched, touch{lc, end})
		} else if lc.hangUp && len(lc.cmds) == 0 {
			t.touched = append(t.touched, touch{lc, end}) // to hang up once sent
		}
		if len(lc.cmds) > 0 && len(lc.out) <= maxBacklog {
			l.queue(lc)
		}
		l.interest(lc)
	}
	switch {
	case l.inFlight > 0:
	case partmap.Deferred(ctx) == 0:
		l.done1(t) // nothing to wait for
		return
	case len(t.touched) == 1 && len(l.runnable) == 0:
		// One client and nothing else to do: its fsync, waited for here,
		// spares it the syncer's wake-ups, as Redis waits for its own.
		t.err = wait()
		l.done1(t)
		return
	}
	t.wait = wait
	l.inFlight++
	l.syncs <- t
}

// runClient runs lc's whole commands, in order, until one is blocked.
func (l *loop) runClient(lc *lclient) {
	c := lc.cl
	c.ctx = l.turnCtx
	for n := 0; len(lc.cmds) > 0 && n < maxTurnCommands; n++ {
		if len(lc.out) > maxBacklog {
			return // until send takes it below
		}
		rc := lc.cmds[0]
		if cmd, ops, ok := l.s.groupable(c, rc.Args); ok {
			profile := ops[0].Email
			if e, err := partmap.CanonicalEmail(profile); err == nil {
				profile = e
			}
			if l.group.profiles[profile] || len(l.group.items) == maxGroup {
				if l.flushGroup(); lc.blocked {
					return
				}
			}
			l.group.profiles[profile] = true
			l.group.items = append(l.group.items, loopItem{lc: lc, rc: rc, cmd: cmd, x: exchange{args: rc.Args, ops: ops}})
			lc.cmds = lc.cmds[1:]
			continue
		}
		if l.flushGroup(); lc.blocked {
			return
		}
		if l.s.command(&lc.conn, c, rc.Args, true, lc.mayDefer(l.now)) {
			lc.block(l.now)
			return
		}
		lc.retrySince = time.Time{}
		lc.cmds = lc.cmds[1:]
		lc.conn.Flush()
		if c.quit {
			lc.cmds, lc.hangUp = nil, true
			return
		}
	}
}

func (lc *lclient) mayDefer(now time.Time) bool {
	return lc.retrySince.IsZero() || now.Sub(lc.retrySince) < retryTime
}

func (lc *lclient) block(now time.Time) {
	lc.blocked = true
	if lc.retrySince.IsZero() {
		lc.retrySince = now
	}
}

// loopGroup is the writes of single profiles gathered in a turn, from one
// client or many, to run as one transaction (pipeline.go).
type loopGroup struct {
	items    []loopItem
	profiles map[string]bool
}

type loopItem struct {
	lc  *lclient
	rc  redcon.Command
	cmd *command
	x   exchange
}

// flushGroup runs the group and writes its replies. A client whose
// command meets a locked partition gets it back, with its commands after
// it, at the head of what it has to run.
func (l *loop) flushGroup() {
	g := &l.group
	if len(g.items) == 0 {
		return
	}
	alone := l.s.transactGroup(partmap.NoLockWait(l.turnCtx), len(g.items), func(i int) *exchange { return &g.items[i].x })
	var blocked []*lclient
	for i := range g.items {
		it := &g.items[i]
		lc := it.lc
		if lc.blocked {
			lc.pushback = append(lc.pushback, it.rc)
			continue
		}
		if alone {
			k := call{s: l.s, c: lc.cl, conn: &lc.conn, ctx: partmap.NoLockWait(l.turnCtx), store: l.s.raw, args: it.rc.Args}
			k.runAlone(it.cmd, &it.x)
			if conflicted(it.x.res) && lc.mayDefer(l.now) {
				lc.block(l.now)
				lc.pushback = append(lc.pushback, it.rc)
				blocked = append(blocked, lc)
				continue
			}
		}
		lc.retrySince = time.Time{}
		w := writer{Conn: &lc.conn, proto: lc.cl.proto}
		it.cmd.reply(&w, &it.x)
	}
	for _, lc := range blocked {
		lc.cmds = append(lc.pushback, lc.cmds...)
		lc.pushback = nil
	}
	clear(g.items)
	g.items = g.items[:0]
	clear(g.profiles)
}

// syncer ends the turns' waits, in order.
func (l *loop) syncer(done chan<- struct{}) {
	defer close(done)
	for t := range l.syncs {
		t.err = t.wait()
		l.mu.Lock()
		l.synced = append(l.synced, t)
		l.mu.Unlock()
		l.signal()
	}
}

// release sends the replies of the turns the syncer has ended.
func (l *loop) release() {
	l.mu.Lock()
	ts := l.synced
	l.synced = nil
	l.mu.Unlock()
	for _, t := range ts {
		l.inFlight--
		l.done1(t)
	}
}

// done1 sends a turn's replies, or, when its writes did not become
// durable, hangs up on its clients without them.
func (l *loop) done1(t *turn) {
	for _, tc := range t.touched {
		lc := tc.c
		if lc.gone {
			continue
		}
		if t.err != nil {
			l.s.log.Error("resp: a write did not become durable; hanging up without the replies", "addr", lc.cl.addr, "err", t.err)
			l.drop(lc)
			continue
		}
		lc.sendable = max(lc.sendable, tc.end)
		l.send(lc)
	}
}

// send writes what lc may be sent.
func (l *loop) send(lc *lclient) {
	if lc.gone {
		return
	}
	if n := lc.sendable - lc.sent; n > 0 {
		m, err := unix.Write(lc.fd, lc.out[:n])
		if m > 0 {
			lc.out = lc.out[m:]
			lc.sent += int64(m)
			lc.stalled = time.Time{}
		}
		if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			l.drop(lc)
			return
		}
		if len(lc.out) == 0 {
			lc.out = nil
		} else if lc.sendable > lc.sent && lc.stalled.IsZero() {
			lc.stalled = l.now
		}
	}
	if lc.hangUp && len(lc.out) == 0 && len(lc.cmds) == 0 && lc.fail == "" && lc.sent == lc.replied {
		l.drop(lc)
		return
	}
	if len(lc.cmds) > 0 && len(lc.out) <= maxBacklog {
		l.queue(lc) // it had waited for its replies to be read
	}
	l.interest(lc)
}

// interest sets what epoll tells of lc: its input unless it has a turn's
// worth of commands to run, commands waiting for a locked partition or
// many replies unread; and room for its replies while they wait.
func (l *loop) interest(lc *lclient) {
	if lc.gone {
		return
	}
	var want uint32
	if !lc.hangUp && len(lc.cmds) < maxTurnCommands && len(lc.out) <= maxBacklog && lc.retrySince.IsZero() {
		want |= unix.EPOLLIN
	}
	if lc.sendable > lc.sent {
		want |= unix.EPOLLOUT
	}
	if want != lc.interest {
		unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, lc.fd, &unix.EpollEvent{Events: want, Fd: int32(lc.fd)})
		lc.interest = want
	}
}

func (l *loop) drop(lc *lclient) {
	if lc.gone {
		return
	}
	lc.gone = true
	unix.Close(lc.fd) // also takes it out of epoll
	delete(l.clients, lc.fd)
	l.s.loopClients.Add(-1)
	l.s.cursors.release(lc.cl)
}

// sweep hangs up on clients that take too long to send a command or to
// read their replies.
func (l *loop) sweep() {
	l.lastSweep = l.now
	for _, lc := range l.clients {
		switch {
		case lc.frame.partial > 0 && !lc.begun.IsZero() && l.now.Sub(lc.begun) > l.s.cmdTimeout:
			l.s.log.Debug("resp: hanging up on a client that did not finish its command", "addr", lc.cl.addr)
			l.drop(lc)
		case !lc.stalled.IsZero() && l.now.Sub(lc.stalled) > l.s.writeTimeout:
			l.s.log.Debug("resp: hanging up on a client that does not read its replies", "addr", lc.cl.addr)
			l.drop(lc)
		}
	}
}
