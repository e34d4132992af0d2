package resp

import (
	"context"

	"github.com/tidwall/redcon"

	"github.com/partmap/partmap"
)

// A pipeline's writes commit together. Consecutive commands that each
// write one profile, all of them different profiles, run as one
// transaction whose operations fail alone (partmap.Operation.FailAlone),
// as EXEC's do: one invocation, one batch and one commit where each
// command would have had its own. Each command keeps its own reply, and
// one that fails answers its error in its place while the others apply.
// Grouping adds nothing a client can tell: the commands run in the order
// sent, their replies wait for the pipeline's end anyway, and every
// command keeps its own change feed event, since no two of a group write
// one profile (a transaction's event names a profile's last write).
// Anything else (a read, a command of several keys, MULTI, a refusal)
// ends the group, runs alone in its place, and a new group begins after
// it. A group that meets a lock conflict wrote nothing and runs again
// command by command, each retried on its own, so that the conflict
// delays only the commands of its partition. A group that fails otherwise
// (the store unavailable: it may have committed) is not run again: each
// of its commands answers the failure, as it would have alone.

// maxGroup bounds a group's commands, below partmap.MaxTransactionOps.
const maxGroup = 64

type grouped struct {
	cmd *command
	x   exchange
}

// runPipeline runs cmds, the commands of one pipeline, in order.
func (s *Server) runPipeline(conn redcon.Conn, c *client, cmds []redcon.Command) {
	var group []grouped
	profiles := map[string]bool{}
	flush := func() {
		s.runGroup(conn, c, group)
		group = group[:0]
		clear(profiles)
	}
	for _, rc := range cmds {
		if c.quit {
			break // QUIT drops the rest of the pipeline
		}
		cmd, ops, ok := s.groupable(c, rc.Args)
		if !ok {
			flush()
			s.one(conn, c, rc.Args)
			continue
		}
		profile := ops[0].Email
		if e, err := partmap.CanonicalEmail(profile); err == nil {
			profile = e
		}
		if profiles[profile] || len(group) == maxGroup {
			flush()
		}
		profiles[profile] = true
		group = append(group, grouped{cmd: cmd, x: exchange{args: rc.Args, ops: ops}})
	}
	flush()
}

// groupable parses args if they are a command that may join a group: a
// write of one operation on one profile, that the client may send now.
func (s *Server) groupable(c *client, args [][]byte) (*command, []partmap.Operation, bool) {
	if len(args) == 0 || c.tx.queue != nil {
		return nil, nil, false
	}
	cmd, refusal := admit(c, args)
	if refusal != "" || !cmd.write || cmd.parse == nil || cmd.ttl || cmd.run != nil {
		return nil, nil, false
	}
	ops, err := cmd.parse(args, nil)
	if err != nil || len(ops) != 1 || ops[0].To != "" {
		return nil, nil, false
	}
	switch ops[0].Op {
	case partmap.OpGet, partmap.OpRename, partmap.OpCopy:
		return nil, nil, false
	}
	return cmd, ops, true
}

// runGroup runs a group's commands, as one transaction when there are
// several, and writes their replies in order.
func (s *Server) runGroup(conn redcon.Conn, c *client, group []grouped) {
	if len(group) == 0 {
		return
	}
	k, w := &c.call, &c.w
	*w = writer{Conn: conn, proto: c.proto}
	*k = call{s: s, c: c, w: w, conn: conn, ctx: c.ctx, store: s.store}
	alone := s.transactGroup(k.ctx, len(group), func(i int) *exchange { return &group[i].x })
	for i := range group {
		g := &group[i]
		if alone {
			k.runAlone(g.cmd, &g.x)
		}
		g.cmd.reply(w, &g.x)
	}
}

// transactGroup runs the exchanges of a group, x(0) to x(n-1), each one
// write of a profile of its own, as one transaction whose operations
// fail alone, and sets their results. It is not retried whole (s.raw):
// it returns true, having set nothing, when each must run alone instead,
// since the group is of one or met a lock conflict and wrote nothing. A
// group that fails otherwise (it may have committed) gives each its
// failure.
func (s *Server) transactGroup(ctx context.Context, n int, x func(i int) *exchange) (alone bool) {
	if n < 2 {
		return true
	}
	ops := make([]partmap.Operation, n)
	for i := range ops {
		ops[i] = sent(x(i).ops[0])
		ops[i].FailAlone = true
	}
	results, err := s.raw.Transact(ctx, ops)
	if partmap.ErrorCode(err) == partmap.ELOCKCONFLICT {
		return true
	}
	for i := range n {
		if err != nil {
			op := x(i).ops[0]
			x(i).res = []partmap.OperationResult{{Op: op.Op, Email: op.Email, Err: err}}
		} else {
			x(i).res = results[i : i+1]
		}
	}
	return false
}
