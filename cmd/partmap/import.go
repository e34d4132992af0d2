package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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

	total := 0 // valid profiles, when validated first
	if !*skip {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		valid, bad, err := pmhttp.ValidateImport(f, opts)
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
		total = valid
	}

	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, _ := f.Stat()
	bar := newImportBar(e.stderr, isTerminal(e.stderr), total, st.Size())
	opts.Progress = bar.update
	res, err := cl.Import(ctx, f, opts)
	if err != nil {
		return describeLineErr(err)
	}
	bar.finish()
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
	fmt.Fprintf(e.stderr, "imported %s (%d new, %d replaced); %s rejected\n", count(res.Written, "profile"), res.Created, res.Written-res.Created, count(len(res.Rejected), "line"))
	return nil
}

// importBar draws an import's progress in profiles, so that its rate reads
// in profiles per second.
type importBar struct {
	bar   *progressbar.ProgressBar
	known bool  // the total is counted, not estimated
	size  int64 // of the input
}

// newImportBar starts the bar's clock: a bar that started at its first
// update would divide a whole batch by almost no time ("202 GB/s"). A
// total of 0 is unknown, and estimated as the import goes. Updates come
// once per batch, so the bar needs no throttle, which would drop the frame
// of a new estimate.
func newImportBar(w io.Writer, visible bool, total int, size int64) *importBar {
	b := &importBar{known: total > 0, size: size}
	b.bar = progressbar.NewOptions(max(total, 1), progressbar.OptionSetWriter(w), progressbar.OptionSetVisibility(visible),
		progressbar.OptionSetDescription("importing"), progressbar.OptionShowIts(), progressbar.OptionSetItsString("profiles"),
		progressbar.OptionClearOnFinish())
	b.bar.StartWithoutRender()
	return b
}

func (b *importBar) update(p pmhttp.ImportProgress) {
	b.bar.Set64(int64(p.Profiles))
	if !b.known && p.Bytes > 0 {
		// Without a validating pass nobody has counted the profiles: the
		// share of the input read so far estimates their number, kept
		// above the count so that the bar ends when the import does.
		est := int64(float64(p.Profiles) * float64(b.size) / float64(p.Bytes))
		b.bar.ChangeMax64(max(est, int64(p.Profiles)+1))
	}
}

func (b *importBar) finish() { b.bar.Finish() }

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
