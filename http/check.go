package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap"
)

// checkReply is the reply of GET /check?partition=N.
type checkReply struct {
	Partition    string      `json:"partition"`
	Profiles     int64       `json:"profiles"`
	Counted      int64       `json:"counted"`
	IndexEntries int64       `json:"indexEntries"`
	OK           bool        `json:"ok"`
	Drift        []driftJSON `json:"drift"`
}

// driftJSON is one disagreement between a profile and the index.
type driftJSON struct {
	Email   string `json:"emailAddress"`
	Field   string `json:"field"`
	Value   string `json:"value"`
	Problem string `json:"problem"` // "missing" or "stale"
}

func replyOf(c partmap.PartitionCheck) checkReply {
	reply := checkReply{Partition: c.Partition.String(), Profiles: c.Profiles, Counted: c.Counted,
		IndexEntries: c.IndexEntries, OK: c.OK(), Drift: []driftJSON{}}
	for _, d := range c.Drift {
		problem := "stale"
		if d.Missing {
			problem = "missing"
		}
		reply.Drift = append(reply.Drift, driftJSON{Email: d.Email, Field: d.Field, Value: d.Value, Problem: problem})
	}
	return reply
}

func (r checkReply) check() (partmap.PartitionCheck, error) {
	p, err := parsePartition(r.Partition)
	if err != nil {
		return partmap.PartitionCheck{}, err
	}
	check := partmap.PartitionCheck{Partition: p, Profiles: r.Profiles, Counted: r.Counted, IndexEntries: r.IndexEntries}
	for _, d := range r.Drift {
		check.Drift = append(check.Drift, partmap.IndexDrift{Email: d.Email, Field: d.Field, Value: d.Value, Missing: d.Problem == "missing"})
	}
	return check, nil
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request, q url.Values) error {
	v, err := oneParam(q, "partition", true)
	if err != nil {
		return err
	}
	p, err := parsePartition(v)
	if err != nil {
		return err
	}
	c, err := s.store.CheckPartition(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, replyOf(c))
}

// Check trailers: a check of many partitions is a stream, whose outcome
// comes after its body, as an export's does.
const (
	checkCountTrailer = "Partmap-Check-Partitions"
	checkErrorTrailer = "Partmap-Check-Error"
)

// errHeadOnly stops a HEAD request's check after its first partition:
// enough to know the status a GET would get.
var errHeadOnly = errors.New("head only")

// handleChecks checks the partitions from up to to (the whole map by
// default) in one request, streaming each one's check as a JSON line.
func (s *Server) handleChecks(w http.ResponseWriter, r *http.Request, q url.Values) error {
	var bounds [2]partmap.Partition
	for i, name := range []string{"from", "to"} {
		v, err := oneParam(q, name, false)
		if err != nil {
			return err
		}
		if v != "" {
			if bounds[i], err = parsePartition(v); err != nil {
				return err
			}
			if i == 1 {
				if bounds[1] < bounds[0] {
					return partmap.Errorf(partmap.EINVALID, "to %d is before from %d", bounds[1], bounds[0])
				}
				bounds[1]++ // to is the last partition checked
			}
		}
	}
	stream := newLineStream(w, checkCountTrailer, checkErrorTrailer)
	err := s.store.CheckPartitions(r.Context(), bounds[0], bounds[1], func(c partmap.PartitionCheck) error {
		if r.Method == http.MethodHead {
			return errHeadOnly
		}
		line, err := json.Marshal(replyOf(c))
		if err != nil {
			return err
		}
		return stream.line(line)
	})
	if err == errHeadOnly {
		stream.header()
		return nil
	}
	return stream.finish(err)
}

// parsePartition takes a partition number (278) or name (partition-278).
func parsePartition(v string) (partmap.Partition, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(v, "partition-"), 10, 31)
	if err != nil {
		return 0, partmap.Errorf(partmap.EINVALID, "partition must be a number or a name like partition-278, not %q", v)
	}
	return partmap.Partition(n), nil
}

func (c *Client) CheckPartition(ctx context.Context, p partmap.Partition) (partmap.PartitionCheck, error) {
	var out checkReply
	if _, err := c.do(ctx, request{method: "GET", path: "/check", query: url.Values{"partition": {strconv.Itoa(int(p))}}}, &out); err != nil {
		return partmap.PartitionCheck{}, err
	}
	return out.check()
}

// CheckPartitions checks a range of partitions in one streamed request. It
// fails if the stream ends without the server's count. A lock conflict
// midway (a busy partition) is retried, like any other, from the partition
// it stopped at.
func (c *Client) CheckPartitions(ctx context.Context, first, end partmap.Partition, fn func(partmap.PartitionCheck) error) error {
	if end > 0 && end <= first {
		return partmap.Errorf(partmap.EINVALID, "partitions %d up to %d are not a range", first, end)
	}
	deadline := time.Now().Add(c.opts.RetryFor)
	next := first
	for attempt := 0; ; attempt++ {
		q := url.Values{"from": {strconv.Itoa(int(next))}}
		if end > 0 {
			q.Set("to", strconv.Itoa(int(end-1)))
		}
		_, err := c.do(ctx, request{method: "GET", path: "/checks", query: q, stream: func(resp *http.Response) error {
			return readLines(resp, "check", "partition", checkCountTrailer, checkErrorTrailer, func(line []byte) error {
				var r checkReply
				if err := json.Unmarshal(line, &r); err != nil {
					return fmt.Errorf("check: %w", err)
				}
				check, err := r.check()
				if err != nil {
					return fmt.Errorf("check: %w", err)
				}
				next = check.Partition + 1
				return fn(check)
			})
		}}, nil)
		if !errors.Is(err, partmap.ErrLockConflict) || c.opts.RetryFor < 0 {
			return err
		}
		c.conflicts.Add(1)
		sleep := rand.N(min(c.opts.RetryMax, c.opts.RetryBase<<min(attempt, 20)) + 1)
		if time.Now().Add(sleep).After(deadline) {
			return err
		}
		if err := sleepCtx(ctx, sleep); err != nil {
			return err
		}
	}
}
