package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

func runTx(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "tx", "FILE|-   (JSON Lines: one operation per line, as in POST /transactions)")
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	name := rest[0]
	in := e.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	} else {
		name = "stdin"
	}
	ops, lines, err := readOperations(in, name)
	if err != nil {
		return err
	}
	results, err := cl.Transact(ctx, ops)
	var perr *partmap.Error
	if errors.As(err, &perr) && perr.Operation > 0 && perr.Operation <= len(lines) {
		named := *perr
		named.Message = fmt.Sprintf("%s line %d: %s; nothing was written", name, lines[perr.Operation-1], partmap.ErrorMessage(err))
		return &named
	}
	if err != nil {
		return err
	}
	out, err := pmhttp.TransactionResultLines(ops, results)
	if err != nil {
		return err
	}
	for _, line := range out {
		fmt.Fprintf(e.stdout, "%s\n", line)
	}
	fmt.Fprintf(e.stderr, "applied %s atomically\n", count(len(ops), "operation"))
	return nil
}

// readOperations reads a transaction's operations, one JSON object per
// line, blank lines skipped, and the line each came from. Every line is
// checked before anything is sent.
func readOperations(in io.Reader, name string) (ops []partmap.Operation, lines []int, err error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		op, err := partmap.ParseOperationJSON(line)
		if err != nil {
			return nil, nil, fmt.Errorf("%s line %d: %s; nothing was sent", name, n, partmap.ErrorMessage(err))
		}
		ops, lines = append(ops, op), append(lines, n)
		if len(ops) > partmap.MaxTransactionOps {
			return nil, nil, fmt.Errorf("%s line %d: a transaction takes at most %d operations; nothing was sent", name, n, partmap.MaxTransactionOps)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(ops) == 0 {
		return nil, nil, fmt.Errorf("%s holds no operation; nothing was sent", name)
	}
	return ops, lines, nil
}
