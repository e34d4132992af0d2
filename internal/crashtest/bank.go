package crashtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// BankConfig describes a bank run: accounts are profiles with an integer
// balance, spread over many partitions; workers move amounts between them
// in transactions while the server is SIGKILLed and restarted.
type BankConfig struct {
	Serve
	Accounts int // at most partmap.MaxTransactionOps; 40 by default
	Workers  int // concurrent transferrers; 8 by default
	Cycles   int // kill-and-restart cycles
	Seed     uint64
	Logf     func(format string, args ...any)
}

// BankResult counts what a bank run checked.
type BankResult struct {
	Cycles    int
	Transfers int64 // acknowledged transactions
	Reads     int64 // atomic reads of every balance (a transaction that adds 0 to each), checked
	Exports   int64 // snapshot exports, checked
	Restarts  int   // checks of every account after a restart
}

func (r BankResult) String() string {
	return fmt.Sprintf("%d kill cycles, %d acknowledged transfers; the total held in %d atomic reads, %d snapshot exports and %d checks after restarts",
		r.Cycles, r.Transfers, r.Reads, r.Exports, r.Restarts)
}

const initialBalance = 100

// Bank is the bank test's accounts and their total, for tests that bring
// faults of their own (a Redis failover, say) instead of RunBank's kills.
type Bank struct {
	Accounts []string
	Total    int64
}

// NewBank names n accounts (at most partmap.MaxTransactionOps), each to
// start with the same balance.
func NewBank(n int) Bank {
	b := Bank{Accounts: make([]string, n), Total: int64(initialBalance * n)}
	for i := range b.Accounts {
		b.Accounts[i] = fmt.Sprintf("account%d@bank.example", i)
	}
	return b
}

// Open starts the directory and creates the accounts, in one transaction.
func (b Bank) Open(ctx context.Context, cl *pmhttp.Client) error {
	return openAccounts(ctx, cl, b.Accounts)
}

// Transfer moves a random amount between two or three random accounts.
func (b Bank) Transfer(ctx context.Context, cl *pmhttp.Client, r *rand.Rand) error {
	return transfer(ctx, cl, r, b.Accounts)
}

// AtomicRead checks the total in one transaction that reads every balance.
func (b Bank) AtomicRead(ctx context.Context, cl *pmhttp.Client) error {
	return atomicRead(ctx, cl, b.Accounts, b.Total)
}

// Check checks, with nothing else running, that every account is there,
// that the balances read one by one add up, and every partition's counts
// and index entries.
func (b Bank) Check(ctx context.Context, cl *pmhttp.Client) error {
	return checkAccounts(ctx, cl, b.Accounts, b.Total)
}

// RunBank runs the bank test in the style of Jepsen's: the sum of the
// balances never changes, in any atomic read or export taken during the
// run or any check after a restart, and no account goes missing.
func RunBank(ctx context.Context, cfg BankConfig) (BankResult, error) {
	cfg.Accounts, cfg.Workers = cmp.Or(cfg.Accounts, 40), cmp.Or(cfg.Workers, 8)
	cfg.Logf = orDiscard(cfg.Logf)
	bank := NewBank(cfg.Accounts)
	accounts, total := bank.Accounts, bank.Total
	rng := rand.New(rand.NewPCG(cfg.Seed, 11))
	var res BankResult
	for cycle := 0; ; cycle++ {
		srv, cl, err := cfg.startCycle(ctx, cycle)
		if err != nil {
			return res, err
		}
		if cycle == 0 {
			if err := openAccounts(ctx, cl, accounts); err != nil {
				srv.kill()
				return res, err
			}
		}
		// Quiet, after the restart: every account, one by one, and the total.
		if err := checkAccounts(ctx, cl, accounts, total); err != nil {
			srv.kill()
			return res, fmt.Errorf("cycle %d, after the restart: %w", cycle, err)
		}
		res.Restarts++
		if cycle == cfg.Cycles {
			srv.kill()
			return res, nil
		}

		var transfers, reads, exports atomic.Int64
		ws := &workers{cycle: cycle}
		ws.start(cfg.Workers, rng, func(w int, r *rand.Rand) {
			for {
				var err error
				switch {
				case w == 0:
					err = atomicRead(ctx, cl, accounts, total)
					if err == nil {
						reads.Add(1)
					}
				case w == 1 && r.IntN(4) == 0:
					err = exportTotal(ctx, cl, accounts, total)
					if err == nil {
						exports.Add(1)
					}
				default:
					err = transfer(ctx, cl, r, accounts)
					if err == nil {
						transfers.Add(1)
					}
				}
				var answered *partmap.Error
				switch {
				case err == nil, errors.Is(err, partmap.ErrLockConflict):
					// A conflict the client gave up retrying wrote nothing.
				case errors.As(err, &answered) && answered.Code == partmap.EUNAVAILABLE, !errors.As(err, &answered):
					return // the server is gone: whatever was in flight landed wholly or not at all
				default:
					ws.fail(err)
					return
				}
			}
		})
		// Kill at a random moment, but not before a read has checked the
		// total under way (an export can take a while on a busy cluster).
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		for wait := time.Now().Add(10 * time.Second); reads.Load()+exports.Load() == 0 && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
		srv.kill()
		if err := ws.wait(); err != nil {
			return res, err
		}
		res.Cycles++
		res.Transfers += transfers.Load()
		res.Reads += reads.Load()
		res.Exports += exports.Load()
		cfg.Logf("cycle %d: killed after %d transfers, %d atomic reads, %d exports", cycle, transfers.Load(), reads.Load(), exports.Load())
	}
}

func openAccounts(ctx context.Context, cl *pmhttp.Client, accounts []string) error {
	if _, err := cl.Start(ctx); err != nil {
		return err
	}
	ops := make([]partmap.Operation, len(accounts))
	for i, a := range accounts {
		ops[i] = partmap.Operation{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: a, "balance": strconv.Itoa(initialBalance)},
			Cond: partmap.Condition{IfNoneMatch: true}}
	}
	_, err := cl.Transact(ctx, ops)
	return err
}

// transfer moves a random amount between two or three accounts in one
// transaction; a three-way one also patches a note on the first, so that
// transfers are more than increments.
func transfer(ctx context.Context, cl *pmhttp.Client, r *rand.Rand, accounts []string) error {
	perm := r.Perm(len(accounts))
	amount := int64(1 + r.IntN(20))
	ops := []partmap.Operation{
		{Op: partmap.OpIncrement, Email: accounts[perm[0]], Field: "balance", By: -amount, Cond: partmap.Condition{IfExists: true}},
		{Op: partmap.OpIncrement, Email: accounts[perm[1]], Field: "balance", By: amount},
	}
	if r.IntN(3) == 0 {
		note := strconv.FormatInt(amount, 10)
		ops = append(ops,
			partmap.Operation{Op: partmap.OpIncrement, Email: accounts[perm[1]], Field: "balance", By: -amount},
			partmap.Operation{Op: partmap.OpIncrement, Email: accounts[perm[2]], Field: "balance", By: amount},
			partmap.Operation{Op: partmap.OpPatch, Email: accounts[perm[0]], Patch: partmap.Patch{"lastTransfer": &note}})
	}
	_, err := cl.Transact(ctx, ops)
	return err
}

// atomicRead reads every balance in one transaction that adds 0 to each:
// it locks every account's partition, so it sees one state of them all.
func atomicRead(ctx context.Context, cl *pmhttp.Client, accounts []string, total int64) error {
	ops := make([]partmap.Operation, len(accounts))
	for i, a := range accounts {
		ops[i] = partmap.Operation{Op: partmap.OpIncrement, Email: a, Field: "balance", By: 0, Cond: partmap.Condition{IfExists: true}}
	}
	results, err := cl.Transact(ctx, ops)
	if err != nil {
		return err
	}
	var sum int64
	for _, r := range results {
		sum += r.Value
	}
	if sum != total {
		return fmt.Errorf("an atomic read of every balance sums to %d, not %d", sum, total)
	}
	return nil
}

// exportTotal sums the balances of a snapshot export.
func exportTotal(ctx context.Context, cl *pmhttp.Client, accounts []string, total int64) error {
	seen := map[string]int64{}
	err := cl.ExportProfiles(ctx, func(rec partmap.Record) error {
		n, err := strconv.ParseInt(rec.Profile["balance"], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: balance %q", rec.Profile.Email(), rec.Profile["balance"])
		}
		seen[rec.Profile.Email()] = n
		return nil
	})
	if err != nil {
		return err
	}
	return sumOf(seen, accounts, total, "a snapshot export")
}

func checkAccounts(ctx context.Context, cl *pmhttp.Client, accounts []string, total int64) error {
	seen := map[string]int64{}
	for _, a := range accounts {
		rec, err := cl.FindProfile(ctx, a)
		if errors.Is(err, partmap.ErrNotFound) {
			continue // sumOf reports it
		}
		if err != nil {
			return err
		}
		if seen[a], err = strconv.ParseInt(rec.Profile["balance"], 10, 64); err != nil {
			return fmt.Errorf("%s: balance %q", a, rec.Profile["balance"])
		}
	}
	if err := sumOf(seen, accounts, total, "the accounts read one by one"); err != nil {
		return err
	}
	return cl.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
		if !c.OK() {
			return fmt.Errorf("%s drifted: %+v", c.Partition, c)
		}
		return nil
	})
}

func sumOf(seen map[string]int64, accounts []string, total int64, what string) error {
	var sum int64
	for _, a := range accounts {
		n, ok := seen[a]
		if !ok {
			return fmt.Errorf("%s: account %s is missing", what, a)
		}
		sum += n
	}
	if len(seen) != len(accounts) {
		return fmt.Errorf("%s holds %d accounts, not %d", what, len(seen), len(accounts))
	}
	if sum != total {
		return fmt.Errorf("%s: the balances sum to %d, not %d", what, sum, total)
	}
	return nil
}
