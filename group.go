package partmap

import (
	"context"
	"sync"
)

// GroupWrites returns s with its concurrent writes of single profiles
// committed together: an Apply that arrives while another group runs
// waits for it, and the writes waiting then run as the next group, one
// Transact whose operations fail alone (FailAlone), so that they share
// one invocation, one batch and one commit instead of one each. A lone
// writer runs at once, as without it. Each Apply keeps its own result and
// semantics: no two writes of one group touch the same profile (a second
// write of a profile waits for the next group), and every write still
// has its own change feed event.
//
// A group runs under DeferDurability: once its writes are visible, the
// next group may start, and the group's writers return only once their
// writes are durable, so that the next group's commit overlaps this
// one's fsync. A group that meets a lock conflict wrote nothing: each of
// its writes runs again alone, with its own wait for the lock, so that the
// conflict delays only the writes that need the partition. A group that
// fails otherwise (the store unavailable: it may have committed) is not
// run again; each of its writers gets the failure.
//
// Reads, conditional writes (a failed condition fails a whole
// transaction), renames and copies, and writes under DeferDurability
// (whose caller already shares fsyncs) pass through.
func GroupWrites(s Store) Store { return &writeGroups{Store: s} }

// maxWriteGroup bounds a group, below MaxTransactionOps.
const maxWriteGroup = 64

type writeGroups struct {
	Store
	mu      sync.Mutex
	running bool           // a group runs; its writers wait
	queue   []*queuedWrite // the writes for the groups after it
}

type queuedWrite struct {
	ctx     context.Context
	op      Operation
	profile string // canonical
	res     OperationResult
	err     error
	lead    bool // run the next group
	alone   bool // its group met a lock conflict: run again alone
	done    chan struct{}
}

// groupKey is op's canonical profile when op may join a group.
func groupKey(ctx context.Context, op Operation) (string, bool) {
	switch op.Op {
	case OpGet, OpRename, OpCopy:
		return "", false
	}
	if op.To != "" || op.Cond.IfExists || op.Cond.IfNoneMatch || op.Cond.IfMatch != nil || Deferring(ctx) {
		return "", false
	}
	email := op.Email
	if op.Op == OpPut && email == "" {
		email = op.Profile[FieldEmail]
	}
	canonical, err := CanonicalEmail(email)
	return canonical, err == nil
}

func (g *writeGroups) Apply(ctx context.Context, op Operation) (OperationResult, error) {
	profile, ok := groupKey(ctx, op)
	if !ok {
		return g.Store.Apply(ctx, op)
	}
	w := &queuedWrite{ctx: ctx, op: op, profile: profile, done: make(chan struct{})}
	g.mu.Lock()
	if g.running {
		g.queue = append(g.queue, w)
		g.mu.Unlock()
		// Not on ctx's end: a group that holds w may be committing it.
		<-w.done
		if !w.lead {
			if w.alone {
				w.res, w.err = g.Store.Apply(ctx, op)
			}
			return w.res, w.err
		}
		// w leads the group that was queued behind the last.
	} else {
		g.running = true
		g.mu.Unlock()
	}
	g.lead(w)
	return w.res, w.err
}

// lead runs the group that first heads: the writes queued now, but the
// second of a profile, up to maxWriteGroup. Once the group's writes are
// visible it hands the lead to the next queued write, then waits for
// their durability and wakes their writers.
func (g *writeGroups) lead(first *queuedWrite) {
	g.mu.Lock()
	group := []*queuedWrite{first}
	profiles := map[string]bool{first.profile: true}
	rest := g.queue[:0]
	for _, w := range g.queue {
		if len(group) < maxWriteGroup && !profiles[w.profile] {
			profiles[w.profile] = true
			group = append(group, w)
		} else {
			rest = append(rest, w)
		}
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	g.mu.Unlock()

	// The group's writes are made under the first writer's context, without
	// its cancellation: the others' writes must not end with its request.
	ctx, wait := DeferDurability(context.WithoutCancel(first.ctx))
	g.run(ctx, group)

	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		g.queue = g.queue[1:]
		next.lead = true
		close(next.done)
	} else {
		g.running = false
	}
	g.mu.Unlock()

	if err := wait(); err != nil {
		for _, w := range group {
			if w.err == nil && !w.alone {
				w.res, w.err = OperationResult{}, err
			}
		}
	}
	for _, w := range group[1:] {
		close(w.done)
	}
	if first.alone {
		first.res, first.err = g.Store.Apply(first.ctx, first.op)
	}
}

// run runs a group's writes. A panic in the store is every writer's
// failure, not the end of the groups: the lead must pass on.
func (g *writeGroups) run(ctx context.Context, group []*queuedWrite) {
	defer func() {
		if r := recover(); r != nil {
			for _, w := range group {
				w.res, w.err, w.alone = OperationResult{}, Errorf(EINTERNAL, "a grouped write panicked: %v", r), false
			}
		}
	}()
	if len(group) == 1 {
		group[0].res, group[0].err = g.Store.Apply(ctx, group[0].op)
		return
	}
	ops := make([]Operation, len(group))
	for i, w := range group {
		ops[i] = w.op
		ops[i].FailAlone = true
	}
	results, err := g.Store.Transact(ctx, ops)
	for i, w := range group {
		switch {
		case err == nil:
			w.res, w.err = results[i], results[i].Err
		case ErrorCode(err) == ELOCKCONFLICT:
			w.alone = true
		default:
			w.err = err
		}
	}
}
