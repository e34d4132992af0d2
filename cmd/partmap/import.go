package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// A bulk request carries at most importBatch profiles and importBatchBytes
// of JSON Lines: large profiles fill the server's body limit long before
// the count.
const (
	importBatch      = partmap.MaxBulkProfiles
	importBatchBytes = pmhttp.MaxBulkBodyBytes
)

var bom = []byte("\xef\xbb\xbf")

// lineError is a bad input line.
type lineError struct {
	line int
	err  error
}

func (e lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, describe(e.err)) }

// profileReader yields the profiles of a JSONL or CSV stream one at a time,
// with the line each starts on, so that memory stays constant whatever the
// size of the input.
type profileReader interface {
	// next returns io.EOF at the end and a lineError for a bad line. raw is
	// the profile's JSON as read, for JSONL, so that it goes to the server
	// as it is instead of being encoded again; nil for CSV.
	next() (p partmap.Profile, raw []byte, line int, err error)
}

type jsonlReader struct {
	r    *bufio.Reader
	line int
}

func (j *jsonlReader) next() (partmap.Profile, []byte, int, error) {
	for {
		// ReadBytes joins the read buffers, so a character split across
		// two of them arrives whole, and returns a new slice each time.
		b, err := j.r.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			return nil, nil, j.line, err
		}
		j.line++
		if j.line == 1 {
			b = bytes.TrimPrefix(b, bom)
		}
		b = bytes.TrimRight(b, "\r\n")
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		p, perr := partmap.ParseProfileJSON(b)
		if perr != nil {
			return nil, nil, j.line, lineError{j.line, perr}
		}
		return p, b, j.line, nil
	}
}

type csvReader struct {
	r      *csv.Reader
	header []string
}

func newCSVReader(r io.Reader) (*csvReader, error) {
	c := &csvReader{r: csv.NewReader(r)}
	header, err := c.r.Read()
	if err != nil {
		return nil, lineError{1, fmt.Errorf("reading the header row: %w", err)}
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], string(bom))
	}
	for _, h := range header {
		if !utf8.ValidString(h) {
			return nil, lineError{1, partmap.Errorf(partmap.EINVALIDUTF8, "a column name is not valid UTF-8")}
		}
	}
	c.header = header
	return c, nil
}

func (c *csvReader) next() (partmap.Profile, []byte, int, error) {
	rec, err := c.r.Read()
	line, _ := c.r.FieldPos(0)
	if err == io.EOF {
		return nil, nil, line, err
	}
	var perr *csv.ParseError
	if errors.As(err, &perr) {
		return nil, nil, perr.StartLine, lineError{perr.StartLine, partmap.Errorf(partmap.EINVALID, "%v", perr.Err)}
	}
	if err != nil {
		return nil, nil, line, err
	}
	p := make(partmap.Profile, len(rec))
	for i, v := range rec {
		if !utf8.ValidString(v) {
			return nil, nil, line, lineError{line, partmap.Errorf(partmap.EINVALIDUTF8, "column %q is not valid UTF-8", c.header[i])}
		}
		p[c.header[i]] = v // an empty cell is an empty value
	}
	return p, nil, line, nil
}

// eachValid reads every profile, passes the valid ones to fn with their
// canonical email and their JSON, and returns the bad lines. Any other
// error (an unreadable file, a failed request) stops the walk.
func eachValid(r profileReader, fn func(email string, json []byte, line int) error) (bad []error, err error) {
	for {
		p, raw, line, err := r.next()
		if err == io.EOF {
			return bad, nil
		}
		var email string
		if err == nil {
			email, err = validate(p, line)
		}
		if err == nil && raw == nil {
			if raw, err = p.MarshalJSON(); err != nil {
				err = lineError{line, err}
			}
		}
		var le lineError
		switch {
		case errors.As(err, &le):
			bad = append(bad, err)
		case err != nil:
			return bad, err
		default:
			if err := fn(email, raw, line); err != nil {
				return bad, err
			}
		}
	}
}

func lineOf(err error) int {
	var le lineError
	errors.As(err, &le)
	return le.line
}

// countingReader counts the bytes read, for the progress bar.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// validate applies the server's checks locally, so that a bad line is found
// before anything is written, and returns the canonical email.
func validate(p partmap.Profile, line int) (string, error) {
	email, ok := p[partmap.FieldEmail]
	if !ok {
		return "", lineError{line, partmap.Errorf(partmap.EINVALIDEMAIL, "emailAddress is missing")}
	}
	if err := partmap.DefaultLimits.CheckProfile(p); err != nil {
		return "", lineError{line, err}
	}
	canonical, err := partmap.CanonicalEmail(email)
	if err != nil {
		return "", lineError{line, err}
	}
	return canonical, nil
}

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
	var read countingReader
	open := func() (profileReader, func(), int64, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, 0, err
		}
		st, _ := f.Stat()
		read = countingReader{r: f}
		br := bufio.NewReader(&read)
		if *format == "csv" {
			r, err := newCSVReader(br)
			if err != nil {
				f.Close()
				return nil, nil, 0, err
			}
			return r, func() { f.Close() }, st.Size(), nil
		}
		return &jsonlReader{r: br}, func() { f.Close() }, st.Size(), nil
	}

	var bad []error
	if !*skip {
		r, closeFile, _, err := open()
		if err != nil {
			return err
		}
		bad, err = eachValid(r, func(string, []byte, int) error { return nil })
		closeFile()
		if err != nil {
			return err
		}
		if len(bad) > 0 {
			for _, b := range bad[:min(len(bad), 20)] {
				fmt.Fprintln(e.stderr, b)
			}
			return fmt.Errorf("%d invalid lines; nothing was written (use --skip-invalid to write the valid ones)", len(bad))
		}
	}

	r, closeFile, size, err := open()
	if err != nil {
		return err
	}
	defer closeFile()
	bar := progressbar.NewOptions64(size, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
		progressbar.OptionSetDescription("importing"), progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
	// One goroutine reads and validates the next batch while earlier ones
	// are on the wire, so that parsing overlaps the server's commits.
	type batch struct {
		json   [][]byte
		bytes  int // of the request body: each line and its newline
		lines  []int
		emails map[string]bool // canonical
		read   int64
	}
	batches := make(chan batch, 1)
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var rejected []error
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		var b batch
		send := func() error {
			b.read = read.n
			select {
			case batches <- b:
				b = batch{}
				return nil
			case <-readCtx.Done():
				return readCtx.Err()
			}
		}
		var err error
		rejected, err = eachValid(r, func(email string, json []byte, line int) error {
			if len(b.json) > 0 && b.bytes+len(json)+1 > importBatchBytes {
				if err := send(); err != nil {
					return err
				}
			}
			if b.emails == nil {
				b.emails = make(map[string]bool, importBatch)
			}
			b.json, b.lines, b.emails[email] = append(b.json, json), append(b.lines, line), true
			b.bytes += len(json) + 1
			if len(b.json) < importBatch {
				return nil
			}
			return send()
		})
		if err == nil && len(b.json) > 0 {
			err = send()
		}
		readErr <- err
	}()
	// Two batches go at once, so that the server's work on one overlaps its
	// work on the other; a batch that shares an email with one in flight
	// waits for it, so that the file's order still decides.
	type sent struct {
		batch
		res  []pmhttp.LineResult
		err  error
		done chan struct{}
	}
	var inFlight []*sent
	written, created := 0, 0
	var writeErr error
	collect := func(s *sent) {
		<-s.done
		if s.err != nil {
			if writeErr == nil {
				writeErr = s.err
			}
			stopReading()
			return
		}
		for i, r := range s.res {
			switch {
			case r.Err != nil:
				bad = append(bad, lineError{s.lines[i], r.Err})
			case r.Created:
				created++
				written++
			default:
				written++
			}
		}
		bar.Set64(max(bar.State().CurrentNum, s.read))
	}
	for b := range batches {
		if writeErr != nil {
			continue // drain
		}
		s := &sent{batch: b, done: make(chan struct{})}
		kept := inFlight[:0]
		for _, f := range inFlight {
			overlaps := false
			for e := range s.emails {
				if f.emails[e] {
					overlaps = true
					break
				}
			}
			if overlaps {
				collect(f)
				continue
			}
			kept = append(kept, f)
		}
		if len(kept) >= 2 {
			collect(kept[0])
			kept = kept[1:]
		}
		inFlight = append(kept, s)
		go func() {
			defer close(s.done)
			s.res, s.err = cl.UpsertJSONLines(ctx, s.json)
		}()
	}
	for _, f := range inFlight {
		collect(f)
	}
	if err := <-readErr; writeErr == nil && err != nil {
		writeErr = err
	}
	bad = append(rejected, bad...)
	slices.SortStableFunc(bad, func(a, b error) int { return lineOf(a) - lineOf(b) })
	if writeErr != nil {
		return writeErr
	}
	bar.Finish()
	if len(bad) > 0 {
		out := e.stderr
		if *rejects != "" {
			f, err := os.Create(*rejects)
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		for _, b := range bad {
			fmt.Fprintln(out, b)
		}
	}
	fmt.Fprintf(e.stderr, "imported %d profiles (%d new, %d replaced); %d lines rejected\n", written, created, written-created, len(bad))
	return nil
}
