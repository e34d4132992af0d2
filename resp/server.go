// Package resp serves the customer directory over the Redis protocol
// (RESP2, and RESP3 after HELLO 3), so that redis-cli, redis-benchmark and
// any Redis client read and write the same store, with the same locks, as
// the HTTP API. A key is a customer email, canonicalised as everywhere
// else; a profile is a hash whose fields are the profile's but
// emailAddress, which the key already is (hashview.go). Replies and error
// strings are Redis's wherever partmap has the command; README.md, "Use
// it from Redis clients", lists them.
//
// The wire protocol is github.com/tidwall/redcon's; this package is the
// command layer. A command of profiles takes three steps: a pure parse of
// its arguments into partmap.Operations, their run on the store (alone,
// or in EXEC's one transaction), and a reply written from the results
// (commands.go).
package resp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
)

// Options configure New. A nil *Options means defaults.
type Options struct {
	// Tokens, when set, make every command but HELLO, AUTH, PING and QUIT
	// wait for an AUTH with a partmap token; a read token's writes, and
	// FLUSHDB and FLUSHALL but with an admin token, are refused with
	// NOPERM. Nil: every client may do everything.
	Tokens *auth.Tokens
	// Log receives connection errors; nil means slog.Default().
	Log *slog.Logger
	// WriteTimeout is how long a reply may wait for a client that does not
	// read it before the client is hung up on; 0 means 10 s.
	WriteTimeout time.Duration
	// CommandTimeout is how long a client may take to finish sending a
	// command it has begun (a slowloris) before it is hung up on; 0 means
	// 30 s. An idle client, between commands, may stay as long as it likes,
	// as Redis's default timeout of 0 lets it.
	CommandTimeout time.Duration
	// EventLoop serves plain TCP and unix-socket clients on one epoll loop
	// per listener, on Linux (loop_linux.go): for a store whose calls do
	// not wait on a network, such as the embedded one, since the loop makes
	// them one at a time. TLS clients, and other systems, keep a goroutine
	// each.
	EventLoop bool
}

// Server answers Redis clients from a partmap.Store.
type Server struct {
	store        partmap.Store           // retrying lock conflicts
	raw          partmap.Store           // not retrying
	emptier      partmap.Emptier         // FLUSHALL's; nil when the store is none
	deadlines    partmap.DeadlineCounter // INFO keyspace's expires= and subexpiry=; nil when the store is none
	tokens       *auth.Tokens
	log          *slog.Logger
	writeTimeout time.Duration
	cmdTimeout   time.Duration
	eventLoop    bool

	nextID  atomic.Int64
	cursors scanCursors // SCAN's

	base    context.Context // the commands'; Close cancels it
	cancel  context.CancelFunc
	running sync.WaitGroup // commands in flight

	mu          sync.Mutex
	clients     map[redcon.Conn]*client
	loopClients atomic.Int64
	lns         []net.Listener
	loops       []*loop
	closed      bool
}

// New returns a server of store.
func New(store partmap.Store, opts *Options) *Server {
	base, cancel := context.WithCancel(context.Background())
	s := &Server{base: base, cancel: cancel, store: retrying{store}, raw: store, log: slog.Default(), clients: map[redcon.Conn]*client{}, writeTimeout: 10 * time.Second, cmdTimeout: 30 * time.Second}
	s.emptier, _ = store.(partmap.Emptier)
	s.deadlines, _ = store.(partmap.DeadlineCounter)
	if opts != nil {
		s.tokens = opts.Tokens
		if opts.Log != nil {
			s.log = opts.Log
		}
		if opts.WriteTimeout > 0 {
			s.writeTimeout = opts.WriteTimeout
		}
		if opts.CommandTimeout > 0 {
			s.cmdTimeout = opts.CommandTimeout
		}
		s.eventLoop = opts.EventLoop
	}
	return s
}

// Serve answers the clients of ln until Close; it always returns a
// non-nil error, net.ErrClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	if s.eventLoop {
		l, err := newLoop(s, ln)
		if err != nil {
			return err
		}
		if l != nil {
			return s.serveLoop(l)
		}
	}
	err := redcon.Serve(limitListener{ln, s.writeTimeout, s.cmdTimeout}, s.handle, s.accept, s.hangUp)
	if err == nil {
		err = net.ErrClosed
	}
	return err
}

func (s *Server) serveLoop(l *loop) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.close()
		return net.ErrClosed
	}
	s.loops = append(s.loops, l)
	s.running.Add(1) // Close waits for the loop's commands
	s.mu.Unlock()
	defer s.running.Done()
	return l.serve()
}

// Close stops every listener and hangs up on every client.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	lns, loops, conns := s.lns, s.loops, make([]redcon.Conn, 0, len(s.clients))
	for c := range s.clients {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var errs []error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, c := range conns {
		// The socket, not redcon's Close, which flushes the connection's
		// writer under its own goroutine's feet.
		c.NetConn().Close()
	}
	s.cancel() // a retry or a wait stops
	for _, l := range loops {
		l.stop()
	}
	s.running.Wait()
	return errors.Join(errs...)
}

// Clients is how many clients are connected.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients) + int(s.loopClients.Load())
}

// newClient is a new connection's state.
func (s *Server) newClient(addr string) *client {
	c := &client{id: s.nextID.Add(1), proto: 2, addr: addr}
	if s.tokens == nil {
		c.authed, c.scope = true, auth.ScopeAdmin
	}
	return c
}

func (s *Server) accept(conn redcon.Conn) bool {
	c := s.newClient(conn.RemoteAddr())
	// One deferral for the connection's life: wait empties it after each
	// pipeline.
	c.ctx, c.wait = partmap.DeferDurability(s.base)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.clients[conn] = c
	conn.SetContext(c)
	return true
}

func (s *Server) hangUp(conn redcon.Conn, err error) {
	s.mu.Lock()
	c := s.clients[conn]
	delete(s.clients, conn)
	s.mu.Unlock()
	if c != nil {
		s.cursors.release(c)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("resp: client hung up", "addr", conn.RemoteAddr(), "err", err)
	}
}

// client is one connection's state.
type client struct {
	id     int64
	addr   string
	proto  int // 2 or 3
	name   string
	authed bool
	user   string // the token's name
	scope  auth.Scope

	// ctx defers the durability of the current pipeline's writes to wait.
	ctx  context.Context
	wait func() error

	tx      transaction // MULTI and WATCH (multi.go)
	quit    bool        // QUIT: hang up after the pipeline's replies
	cursors []uint64    // the SCAN cursors it was handed, oldest first (scan.go)

	// The command running, and its writer: the client's own, reused, so
	// that a command allocates little.
	x    exchange
	call call
	w    writer
}

// handle runs one command and writes its reply.
func (s *Server) handle(conn redcon.Conn, rc redcon.Command) {
	c, _ := conn.Context().(*client)
	args := rc.Args
	if c == nil || len(args) == 0 {
		return
	}
	// Close waits for the commands in flight, so that none reaches the
	// store after serve has closed it.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.NetConn().Close()
		return
	}
	s.running.Add(1)
	s.mu.Unlock()
	defer s.running.Done()
	// The writes of one pipeline share fsyncs: each returns once visible,
	// and after the last command, whatever its reply, the wait for them
	// all ends before redcon writes the replies out. A failed wait hangs
	// up, and no reply of the pipeline is sent.
	defer s.endOfCommand(conn, c)
	if len(conn.PeekPipeline()) > 0 {
		// The rest of the pipeline runs here, its writes grouped.
		s.runPipeline(conn, c, append([]redcon.Command{rc}, conn.ReadPipeline()...))
		return
	}
	s.one(conn, c, args)
}

// one runs one command and writes its reply.
func (s *Server) one(conn redcon.Conn, c *client, args [][]byte) {
	s.command(conn, c, args, false, false)
}

// command runs one command and writes its reply; with noWait, as the
// event loop runs it (call.noWait), and it reports whether the command
// was blocked by a locked partition and left to run again.
func (s *Server) command(conn redcon.Conn, c *client, args [][]byte, noWait, deferConflict bool) (blocked bool) {
	if len(args) == 0 {
		return false
	}
	k, w := &c.call, &c.w
	*w = writer{Conn: conn, proto: c.proto}
	inMulti := c.tx.queue != nil
	cmd, refusal := admit(c, args)
	if refusal != "" {
		c.tx.failed = c.tx.failed || inMulti
		w.WriteError(refusal)
		return false
	}
	*k = call{s: s, c: c, w: w, conn: conn, ctx: c.ctx, store: s.store, args: args, noWait: noWait, deferConflict: deferConflict}
	switch {
	case inMulti && !slices.Contains([]string{"exec", "discard", "multi", "watch", "quit"}, cmd.name):
		k.enqueue(cmd)
	case cmd.run != nil:
		cmd.run(k)
	default:
		k.execute(cmd)
	}
	return k.blocked
}

// admit looks up args' command and returns Redis's refusal of it for
// this client now, or "" when it may run.
func admit(c *client, args [][]byte) (*command, string) {
	cmd, ok := lookup(args[0])
	switch {
	case !ok:
		return nil, unknownCommand(args)
	case !c.authed && !cmd.open:
		return cmd, "NOAUTH Authentication required."
	case !cmd.arity.ok(len(args)):
		return cmd, "ERR wrong number of arguments for '" + cmd.displayName() + "' command"
	case (cmd.write && c.scope < auth.ScopeWrite) || (cmd.admin && c.scope < auth.ScopeAdmin):
		return cmd, "NOPERM this user has no permissions to run the '" + cmd.name + "' command"
	}
	return cmd, ""
}

// endOfCommand waits for the durability of the pipeline's writes after its
// last command.
func (s *Server) endOfCommand(conn redcon.Conn, c *client) {
	if len(conn.PeekPipeline()) > 0 {
		return
	}
	err := c.wait()
	switch {
	case err != nil:
		s.log.Error("resp: a write did not become durable; hanging up without the replies", "addr", c.addr, "err", err)
		redcon.BaseWriter(conn).SetBuffer(nil) // Close would send them
		conn.Close()
	case c.quit:
		conn.Close() // sends the replies, QUIT's OK last
	}
}

// MaxPending bounds the bytes a client may send without completing a
// command: the connection holds them until the command is whole, and
// redcon buffers it whole again before it is parsed, so a huge bulk
// string, a million arguments or an endless line would otherwise take the
// server's memory (a connection holds at most a few times MaxPending). No command partmap takes needs more than a
// few profiles' worth; past the bound the client is hung up on.
const MaxPending = 8 << 20

// limitListener's connections bound what a client may leave unparsed
// (MaxPending) and how long a reply may wait for it to read (a client that
// never reads would otherwise hold its replies, and its goroutine, for
// ever).
type limitListener struct {
	net.Listener
	writeTimeout, cmdTimeout time.Duration
}

func (l limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &limitConn{Conn: c, writeTimeout: l.writeTimeout, cmdTimeout: l.cmdTimeout}, nil
}

type limitConn struct {
	net.Conn
	writeTimeout, cmdTimeout time.Duration
	writeBy                  time.Time // the write deadline set
	framing
	deadline bool // a read deadline is set
	// held is what was read but not yet given to redcon: its first ready
	// bytes end where a command does, the rest is a command's unfinished
	// start. redcon parses again from a command's start on every read, so
	// a large command sent in many pieces would cost it time quadratic in
	// its size; it is given whole commands only.
	held  []byte
	ready int
	err   error // the read error behind held
}

// Write gives a reply between 7/8 of writeTimeout and all of it: the
// deadline is renewed only once an eighth of it has passed, since setting
// it on every reply costs a timer update each.
func (c *limitConn) Write(b []byte) (int, error) {
	if now := time.Now(); c.writeBy.Sub(now) < c.writeTimeout-c.writeTimeout/8 {
		c.writeBy = now.Add(c.writeTimeout)
		c.Conn.SetWriteDeadline(c.writeBy)
	}
	return c.Conn.Write(b)
}

func (c *limitConn) Read(b []byte) (int, error) {
	for c.ready == 0 {
		if c.frame.err != nil {
			return 0, c.frame.err
		}
		if c.err != nil {
			return 0, c.err
		}
		c.setDeadline()
		left := MaxPending - c.frame.partial
		if len(c.held) == 0 {
			// Nothing held: read into b itself, and give at once what
			// ends a command, mostly all of it.
			if int64(len(b)) > left {
				b = b[:left+1] // one byte past the bound fails the scan
			}
			n, err := c.Conn.Read(b)
			if whole := c.scan(b[:n]); whole > 0 || err != nil {
				c.held = append(c.held, b[whole:n]...)
				if c.frame.err != nil {
					return 0, c.frame.err // redcon never sees what was refused
				}
				c.err = err
				if whole > 0 {
					return whole, nil
				}
				return 0, err
			}
			c.held = append(c.held, b[:n]...)
			continue
		}
		k := int(min(int64(64<<10), left+1))
		c.held = slices.Grow(c.held, k)
		n, err := c.Conn.Read(c.held[len(c.held) : len(c.held)+k])
		whole := c.scan(c.held[len(c.held) : len(c.held)+n])
		if c.frame.err != nil {
			return 0, c.frame.err
		}
		if whole > 0 {
			c.ready = len(c.held) + whole
		}
		c.held = c.held[:len(c.held)+n]
		c.err = err
	}
	n := copy(b, c.held[:c.ready])
	c.ready -= n
	switch c.held = c.held[n:]; {
	case len(c.held) == 0:
		c.held = nil // a large command's buffer goes with it
	case c.ready == 0:
		c.held = slices.Clone(c.held) // the next command's start alone
	}
	return n, nil
}

// framing follows what a client sends: where each command ends, and when
// the unfinished one began.
type framing struct {
	frame framer
	begun time.Time // when the unfinished command's first byte came; set by the reader
}

// scan follows b's framing and returns how many of its bytes end where a
// command does: all of them once the framing is lost, which redcon then
// answers with a protocol error. A command that ended restarts the clock
// of the one after it.
func (c *framing) scan(b []byte) int {
	before := c.frame.whole
	c.frame.scan(b)
	if c.frame.whole != before {
		c.begun = time.Time{}
	}
	if c.frame.state == frameLost || c.frame.err != nil {
		// Lost framing keeps the clock of the command it began in: the
		// client is hung up on in cmdTimeout unless redcon does first.
		return len(b)
	}
	return len(b) - int(min(c.frame.partial, int64(len(b))))
}

// setDeadline gives the rest of a begun command cmdTimeout to arrive;
// between commands a read waits for ever.
func (c *limitConn) setDeadline() {
	if c.frame.partial > 0 {
		if c.begun.IsZero() {
			c.begun = time.Now()
			c.Conn.SetReadDeadline(c.begun.Add(c.cmdTimeout))
			c.deadline = true
		}
		return
	}
	c.begun = time.Time{}
	if c.deadline {
		c.Conn.SetReadDeadline(time.Time{})
		c.deadline = false
	}
}

// framer follows RESP's framing in what a client sends, byte by byte,
// ahead of redcon: it knows where each command ends, so the bytes of an
// unfinished command are counted exactly, and it refuses what redcon
// handles badly: a multibulk count above Redis's 1,048,576 (redcon walks
// the whole count on every read, so a count of 2^63 spins for ever), and
// a bulk longer than MaxPending.
type framer struct {
	partial int64 // bytes of the command not yet whole
	whole   int64 // commands completed, ever
	state   int
	n       int64 // the number being read, or the bulk bytes left
	neg     bool
	args    int64 // bulks left in the command
	err     error
}

const (
	frameStart = iota
	frameCount // after '*'
	frameBulkStart
	frameBulkLen // after '$'
	frameBulk
	frameInline
	frameLost // framing redcon will refuse: count the bytes, and let it
)

const maxArgs = 1 << 20

var errTooLarge = errors.New("resp: the client sent more than MaxPending bytes without a whole command")

func (f *framer) scan(b []byte) {
	for len(b) > 0 && f.err == nil {
		if f.state == frameBulk { // skip the body at once
			k := min(int64(len(b)), f.n)
			f.n -= k
			f.partial += k
			b = b[k:]
			if f.n == 0 {
				f.args--
				f.state = frameBulkStart
				if f.args == 0 {
					f.done()
				}
			}
			continue
		}
		c := b[0]
		b = b[1:]
		f.partial++
		switch f.state {
		case frameStart:
			switch c {
			case '*':
				f.state, f.n, f.neg = frameCount, 0, false
			case '\r', '\n':
				f.done() // blank lines between commands
			default:
				f.state = frameInline
			}
		case frameInline:
			if c == '\n' {
				f.done()
			}
		case frameCount, frameBulkLen:
			switch {
			case c >= '0' && c <= '9':
				f.n = f.n*10 + int64(c-'0')
				if f.n > MaxPending {
					f.err = errTooLarge
				}
			case c == '-' && f.n == 0:
				f.neg = true
			case c == '+' && f.n == 0 && !f.neg:
				// redcon's numbers are strconv.Atoi's, which take a sign
			case c == '\r':
			case c == '\n' && f.state == frameCount:
				switch {
				case f.neg || f.n == 0:
					f.done() // redcon answers an empty or negative count
				case f.n > maxArgs:
					f.err = errors.New("resp: a command of more than 1,048,576 arguments")
				default:
					f.args, f.state = f.n, frameBulkStart
				}
			case c == '\n':
				if f.neg {
					f.state = frameLost
					break
				}
				f.n += 2 // and the CRLF after the body
				f.state = frameBulk
			default:
				f.state = frameLost
			}
		case frameBulkStart:
			if c != '$' {
				f.state = frameLost
				break
			}
			f.state, f.n, f.neg = frameBulkLen, 0, false
		}
		if f.partial > MaxPending {
			f.err = errTooLarge
		}
	}
}

func (f *framer) done() { f.partial, f.state, f.whole = 0, frameStart, f.whole+1 }
