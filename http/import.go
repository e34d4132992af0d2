package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// A bulk request carries at most importBatch profiles and importBatchBytes
// of JSON Lines: large profiles fill the server's body limit long before
// the count.
const (
	importBatch      = partmap.MaxBulkProfiles
	importBatchBytes = MaxBulkBodyBytes
)

// ImportOptions configure Import and ValidateImport.
type ImportOptions struct {
	// Format is "jsonl" (one JSON object per line, the default) or "csv"
	// (a header row of field names, then one profile per record).
	Format string
	// Progress, if set, is called after each batch the server answers, on
	// the goroutine that called Import.
	Progress func(ImportProgress)
}

// ImportProgress is how far an import has got.
type ImportProgress struct {
	Profiles int   // profiles the server has answered, written or refused
	Bytes    int64 // how far into the input the answered batches reach
}

// ImportResult is what an import wrote and what it did not.
type ImportResult struct {
	Written  int         // profiles created or replaced
	Created  int         // of Written, those that were new
	Rejected []LineError // lines not written, invalid or refused, in input order
}

// LineError is a line of an import's input that was not written.
type LineError struct {
	Line int // 1-based; a CSV record's first line
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e LineError) Unwrap() error { return e.Err }

// ValidateImport applies the server's checks to every profile of r, writing
// nothing, and returns how many are valid and which lines are not. An
// import that must write all or nothing validates first, then reads the
// input again for Import; memory stays constant either way.
func ValidateImport(r io.Reader, opts ImportOptions) (valid int, invalid []LineError, err error) {
	pr, err := newProfileReader(r, opts.Format)
	if err != nil {
		return 0, nil, err
	}
	invalid, err = eachValid(pr, func(string, []byte, int) error {
		valid++
		return nil
	})
	return valid, invalid, err
}

// Import upserts the profiles of r, a JSON Lines or CSV stream, in bulk
// requests; a JSON line may carry the profile's deadlines, as Export
// writes them, and the profile is written with them. It writes every valid profile and returns the other lines in
// the result; run ValidateImport first to write nothing unless all are
// valid. A profile that appears twice ends as its last line says. An error
// (an unreadable input, a failed request) stops the import; the result
// then holds what was written before it.
func (c *Client) Import(ctx context.Context, r io.Reader, opts ImportOptions) (ImportResult, error) {
	var res ImportResult
	read := &countingReader{r: r}
	pr, err := newProfileReader(read, opts.Format)
	if err != nil {
		return res, err
	}
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
	var rejected []LineError
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
		rejected, err = eachValid(pr, func(email string, json []byte, line int) error {
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
	// waits for it, so that the input's order still decides.
	type sent struct {
		batch
		res  []LineResult
		err  error
		done chan struct{}
	}
	var inFlight []*sent
	var refused []LineError
	var progress ImportProgress
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
				refused = append(refused, LineError{s.lines[i], r.Err})
			case r.Created:
				res.Created++
				res.Written++
			default:
				res.Written++
			}
		}
		// Batches can be answered out of order; the input's share never
		// shrinks.
		progress.Profiles += len(s.res)
		progress.Bytes = max(progress.Bytes, s.read)
		if opts.Progress != nil {
			opts.Progress(progress)
		}
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
			s.res, s.err = c.UpsertJSONLines(ctx, s.json)
		}()
	}
	for _, f := range inFlight {
		collect(f)
	}
	if err := <-readErr; writeErr == nil && err != nil {
		writeErr = err
	}
	res.Rejected = append(rejected, refused...)
	slices.SortStableFunc(res.Rejected, func(a, b LineError) int { return a.Line - b.Line })
	return res, writeErr
}

var bom = []byte("\xef\xbb\xbf")

// profileReader yields the profiles of a JSONL or CSV stream one at a time,
// with the line each starts on, so that memory stays constant whatever the
// size of the input.
type profileReader interface {
	// next returns io.EOF at the end and a LineError for a bad line. raw is
	// the line as read, for JSONL, so that it goes to the server as it is
	// instead of being encoded again; nil for CSV, whose records have no
	// deadlines.
	next() (rec partmap.Record, raw []byte, line int, err error)
}

func newProfileReader(r io.Reader, format string) (profileReader, error) {
	br := bufio.NewReader(r)
	switch format {
	case "", "jsonl":
		return &jsonlReader{r: br}, nil
	case "csv":
		return newCSVReader(br)
	}
	return nil, fmt.Errorf("import format %q is not jsonl or csv", format)
}

type jsonlReader struct {
	r    *bufio.Reader
	line int
}

func (j *jsonlReader) next() (partmap.Record, []byte, int, error) {
	for {
		// ReadBytes joins the read buffers, so a character split across
		// two of them arrives whole, and returns a new slice each time.
		b, err := j.r.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			return partmap.Record{}, nil, j.line, err
		}
		j.line++
		if j.line == 1 {
			b = bytes.TrimPrefix(b, bom)
		}
		b = bytes.TrimRight(b, "\r\n")
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		rec, perr := partmap.ParseRecordJSON(b)
		if perr != nil {
			return partmap.Record{}, nil, j.line, LineError{j.line, perr}
		}
		return rec, b, j.line, nil
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
		return nil, LineError{1, fmt.Errorf("reading the header row: %w", err)}
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], string(bom))
	}
	seen := make(map[string]bool, len(header))
	for i, h := range header {
		switch {
		case !utf8.ValidString(h):
			return nil, LineError{1, partmap.Errorf(partmap.EINVALIDUTF8, "a column name is not valid UTF-8")}
		case h == "":
			return nil, LineError{1, partmap.Errorf(partmap.EINVALID, "column %d has no name", i+1)}
		case seen[h]:
			// Each row would keep only the last column's value.
			return nil, LineError{1, partmap.Errorf(partmap.EINVALID, "column %q appears more than once", h)}
		}
		seen[h] = true
	}
	c.header = header
	return c, nil
}

func (c *csvReader) next() (partmap.Record, []byte, int, error) {
	rec, err := c.r.Read()
	line, _ := c.r.FieldPos(0)
	if err == io.EOF {
		return partmap.Record{}, nil, line, err
	}
	var perr *csv.ParseError
	if errors.As(err, &perr) {
		return partmap.Record{}, nil, perr.StartLine, LineError{perr.StartLine, partmap.Errorf(partmap.EINVALID, "%v", perr.Err)}
	}
	if err != nil {
		return partmap.Record{}, nil, line, err
	}
	p := make(partmap.Profile, len(rec))
	for i, v := range rec {
		if !utf8.ValidString(v) {
			return partmap.Record{}, nil, line, LineError{line, partmap.Errorf(partmap.EINVALIDUTF8, "column %q is not valid UTF-8", c.header[i])}
		}
		p[c.header[i]] = v // an empty cell is an empty value
	}
	return partmap.Record{Profile: p}, nil, line, nil
}

// eachValid reads every profile, passes the valid ones to fn with their
// canonical email and their JSON, and returns the bad lines. Any other
// error (an unreadable input, a failed request) stops the walk.
func eachValid(r profileReader, fn func(email string, json []byte, line int) error) (bad []LineError, err error) {
	for {
		rec, raw, line, err := r.next()
		if err == io.EOF {
			return bad, nil
		}
		var email string
		if err == nil {
			email, err = validate(rec, line)
		}
		if err == nil && raw == nil {
			if raw, err = rec.Profile.MarshalJSON(); err != nil {
				err = LineError{line, err}
			}
		}
		var le LineError
		switch {
		case errors.As(err, &le):
			bad = append(bad, le)
		case err != nil:
			return bad, err
		default:
			if err := fn(email, raw, line); err != nil {
				return bad, err
			}
		}
	}
}

// countingReader counts the bytes read, for progress reports.
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
func validate(rec partmap.Record, line int) (string, error) {
	p := rec.Profile
	email, ok := p[partmap.FieldEmail]
	if !ok {
		return "", LineError{line, partmap.Errorf(partmap.EINVALIDEMAIL, "emailAddress is missing")}
	}
	if err := partmap.DefaultLimits.CheckProfile(p); err != nil {
		return "", LineError{line, err}
	}
	if err := rec.Deadlines.Check(p); err != nil {
		return "", LineError{line, err}
	}
	canonical, err := partmap.CanonicalEmail(email)
	if err != nil {
		return "", LineError{line, err}
	}
	return canonical, nil
}
