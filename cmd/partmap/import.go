package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	pmhttp "github.com/partmap/partmap/http"
)

func runImport(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "import", "FILE|-")
	format := cf.fs.String("format", "", "jsonl or csv (default: from the file name's extension; jsonl for -)")
	skip := cf.fs.Bool("skip-invalid", false, "write the valid lines and report the others, instead of stopping before writing anything")
	rejects := cf.fs.String("rejects", "", "with --skip-invalid, write the rejected lines' numbers and reasons to this `file` (default: stderr)")
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	name := rest[0]
	if *format == "" {
		*format = "jsonl"
		if strings.HasSuffix(strings.ToLower(name), ".csv") {
			*format = "csv"
		}
	}
	if *format != "jsonl" && *format != "csv" {
		return usagef("--format must be jsonl or csv")
	}
	opts := pmhttp.ImportOptions{Format: *format}
	// Validating first means reading twice; stdin is kept in a temporary
	// file for that, so memory stays constant either way.
	path := name
	if name == "-" {
		f, err := os.CreateTemp("", "partmap-import-")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		if _, err := io.Copy(f, e.stdin); err != nil {
			f.Close()
			return err
		}
		f.Close()
		path = f.Name()
	}

	if !*skip {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		_, bad, err := pmhttp.ValidateImport(f, opts)
		f.Close()
		if err != nil {
			return describeLineErr(err)
		}
		if len(bad) > 0 {
			for _, b := range bad[:min(len(bad), 20)] {
				fmt.Fprintln(e.stderr, describeLine(b))
			}
			return fmt.Errorf("%d invalid lines; nothing was written (use --skip-invalid to write the valid ones)", len(bad))
		}
	}

	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, _ := f.Stat()
	bar := progressbar.NewOptions64(st.Size(), progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
		progressbar.OptionSetDescription("importing"), progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
	opts.Progress = func(p pmhttp.ImportProgress) { bar.Set64(p.Bytes) }
	res, err := cl.Import(ctx, f, opts)
	if err != nil {
		return describeLineErr(err)
	}
	bar.Finish()
	if len(res.Rejected) > 0 {
		out := e.stderr
		if *rejects != "" {
			f, err := os.Create(*rejects)
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		for _, b := range res.Rejected {
			fmt.Fprintln(out, describeLine(b))
		}
	}
	fmt.Fprintf(e.stderr, "imported %d profiles (%d new, %d replaced); %d lines rejected\n", res.Written, res.Created, res.Written-res.Created, len(res.Rejected))
	return nil
}

// describeLine renders a rejected line as describe renders any error.
func describeLine(le pmhttp.LineError) string {
	return fmt.Sprintf("line %d: %s", le.Line, describe(le.Err))
}

// describeLineErr keeps a line's number in an error that stops an import
// (a bad CSV header), which describe would drop for the line's cause.
func describeLineErr(err error) error {
	var le pmhttp.LineError
	if errors.As(err, &le) {
		return errors.New(describeLine(le))
	}
	return err
}
