package http

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/partmap/partmap"
)

// MaxBulkBodyBytes bounds a bulk request body.
const MaxBulkBodyBytes = 16 << 20

// bulkResult is one line's outcome in a bulk reply.
type bulkResult struct {
	Line    int      `json:"line"`
	Status  int      `json:"status"`
	Email   string   `json:"emailAddress,omitempty"`
	ETag    string   `json:"etag,omitempty"`
	Problem *problem `json:"problem,omitempty"`
}

// bulkReply is the body of a bulk reply.
type bulkReply struct {
	Created  int          `json:"created"`
	Replaced int          `json:"replaced"`
	Failed   int          `json:"failed"`
	Results  []bulkResult `json:"results"`
}

// handleBulk upserts the profiles of a JSON Lines body, one per line, each
// with its deadlines if the line has them (partmap.ParseRecordJSON, as an
// export writes them). Every line gets a result; a bad line fails alone.
func (s *Server) handleBulk(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := s.readBodyLimit(w, r, MaxBulkBodyBytes, "application/x-ndjson", "application/jsonl", "application/json")
	if err != nil {
		return err
	}
	reply := bulkReply{Results: []bulkResult{}} // [] for an empty body, never null
	var profiles []partmap.Profile
	var deadlines []partmap.Deadlines // nil unless a line has some
	var lines []int
	for n, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec, err := partmap.ParseRecordJSON(line)
		if err != nil {
			pr := s.problem(r, err)
			reply.Results = append(reply.Results, bulkResult{Line: n + 1, Status: pr.Status, Problem: &pr})
			continue
		}
		if deadlines == nil && !rec.Deadlines.IsZero() {
			deadlines = make([]partmap.Deadlines, len(profiles), cap(profiles))
		}
		if deadlines != nil {
			deadlines = append(deadlines, rec.Deadlines)
		}
		profiles = append(profiles, rec.Profile)
		lines = append(lines, n+1)
	}
	var results []partmap.BulkResult
	if deadlines == nil {
		results, err = s.store.UpsertProfiles(r.Context(), profiles)
	} else {
		records := make([]partmap.Record, len(profiles))
		for i := range profiles {
			records[i] = partmap.Record{Profile: profiles[i], Deadlines: deadlines[i]}
		}
		results, err = s.store.UpsertRecords(r.Context(), records)
	}
	if err != nil {
		return err
	}
	for i, res := range results {
		out := bulkResult{Line: lines[i], Status: http.StatusOK}
		switch {
		case res.Err != nil:
			pr := s.problem(r, res.Err)
			out.Status, out.Problem = pr.Status, &pr
		case res.Created:
			out.Status = http.StatusCreated
		}
		if res.Err == nil {
			out.Email, out.ETag = res.Record.Profile.Email(), res.Record.Version.ETag()
		}
		reply.Results = append(reply.Results, out)
	}
	slices.SortFunc(reply.Results, func(a, b bulkResult) int { return a.Line - b.Line })
	for _, res := range reply.Results {
		switch res.Status {
		case http.StatusCreated:
			reply.Created++
		case http.StatusOK:
			reply.Replaced++
		default:
			reply.Failed++
		}
	}
	return writeJSON(w, http.StatusOK, reply)
}

// UpsertProfiles sends the profiles as one bulk request (at most
// partmap.MaxBulkProfiles, and at most MaxBulkBodyBytes of JSON). Profiles
// that meet a lock conflict are sent again, like any conflict. A result's
// Record holds the profile as sent, with its canonical email, and its
// version.
func (c *Client) UpsertProfiles(ctx context.Context, profiles []partmap.Profile) ([]partmap.BulkResult, error) {
	records := make([]partmap.Record, len(profiles))
	for i, p := range profiles {
		records[i].Profile = p
	}
	return c.UpsertRecords(ctx, records)
}

// UpsertRecords is UpsertProfiles for records with deadlines: each goes as
// one line of the bulk request, as an export writes it.
func (c *Client) UpsertRecords(ctx context.Context, records []partmap.Record) ([]partmap.BulkResult, error) {
	results := make([]partmap.BulkResult, len(records))
	var lines [][]byte
	var sent []int // lines[k] is records[sent[k]]
	for i, rec := range records {
		b, err := partmap.MarshalRecordJSON(rec) // not json.Marshal, which would re-validate it
		if err != nil {
			results[i] = partmap.BulkResult{Err: err} // invalid UTF-8: never sent
			continue
		}
		lines, sent = append(lines, b), append(sent, i)
	}
	lineResults, err := c.UpsertJSONLines(ctx, lines)
	if err != nil {
		return nil, err
	}
	for k, r := range lineResults {
		i := sent[k]
		if r.Err != nil {
			results[i] = partmap.BulkResult{Err: r.Err}
			continue
		}
		rec := partmap.Record{Profile: records[i].Profile, Version: r.Version, Deadlines: records[i].Deadlines}
		if rec.Profile.Email() != r.Email { // the server canonicalised it; leave the caller's map alone
			rec.Profile = rec.Profile.Clone()
			rec.Profile[partmap.FieldEmail] = r.Email
		}
		results[i] = partmap.BulkResult{Record: rec, Created: r.Created}
	}
	return results, nil
}

// LineResult is the outcome of one line of UpsertJSONLines.
type LineResult struct {
	Email   string // canonical
	Version partmap.Version
	Created bool
	Err     error
}

// UpsertJSONLines is UpsertProfiles for profiles already encoded, one JSON
// object per line (without the newline), as an import reads them: they go
// as they are, unparsed. Lines that meet a lock conflict are sent again.
func (c *Client) UpsertJSONLines(ctx context.Context, lines [][]byte) ([]LineResult, error) {
	results := make([]LineResult, len(lines))
	todo := make([]int, len(lines)) // indexes still to send
	for i := range todo {
		todo[i] = i
	}
	deadline := time.Now().Add(c.opts.RetryFor)
	for attempt := 0; len(todo) > 0; attempt++ {
		var body bytes.Buffer
		for _, i := range todo {
			// The server numbers lines, skips blank ones and drops a byte
			// order mark that starts the body: a line that is blank after
			// that, or one that holds a newline, would misnumber the results.
			if bytes.IndexByte(lines[i], '\n') >= 0 || len(bytes.TrimSpace(bytes.TrimPrefix(lines[i], []byte("\ufeff")))) == 0 {
				return nil, fmt.Errorf("bulk line %d is blank or holds a newline", i+1)
			}
			body.Write(lines[i])
			body.WriteByte('\n')
		}
		var reply bulkReply
		_, err := c.do(ctx, request{method: "POST", path: "/customer-profiles/bulk", body: body.Bytes(), contentType: "application/x-ndjson"}, &reply)
		if err != nil {
			return nil, err
		}
		if len(reply.Results) != len(todo) {
			return nil, fmt.Errorf("bulk reply has %d results for %d profiles", len(reply.Results), len(todo))
		}
		var again []int
		for k, res := range reply.Results {
			if res.Line < 1 || res.Line > len(todo) {
				return nil, fmt.Errorf("bulk reply names line %d of %d", res.Line, len(todo))
			}
			i := todo[res.Line-1]
			if res.Problem != nil {
				err := errorOf(*res.Problem, res.Status)
				results[i] = LineResult{Err: err}
				if err.Code == partmap.ELOCKCONFLICT {
					c.conflicts.Add(1)
					again = append(again, i)
				}
				continue
			}
			v, err := partmap.ParseETag(res.ETag)
			if err != nil {
				return nil, fmt.Errorf("bulk result %d: %w", k, err)
			}
			results[i] = LineResult{Email: res.Email, Version: v, Created: res.Status == http.StatusCreated}
		}
		todo = again
		if len(todo) == 0 || c.opts.RetryFor < 0 || time.Now().After(deadline) {
			break
		}
		if err := sleepCtx(ctx, rand.N(min(c.opts.RetryMax, c.opts.RetryBase<<min(attempt, 20))+1)); err != nil {
			return nil, err
		}
	}
	return results, nil
}
