package http

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
	reply := checkReply{Partition: c.Partition.String(), Profiles: c.Profiles, Counted: c.Counted,
		IndexEntries: c.IndexEntries, OK: c.OK(), Drift: []driftJSON{}}
	for _, d := range c.Drift {
		problem := "stale"
		if d.Missing {
			problem = "missing"
		}
		reply.Drift = append(reply.Drift, driftJSON{Email: d.Email, Field: d.Field, Value: d.Value, Problem: problem})
	}
	return writeJSON(w, http.StatusOK, reply)
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
	check := partmap.PartitionCheck{Partition: p, Profiles: out.Profiles, Counted: out.Counted, IndexEntries: out.IndexEntries}
	for _, d := range out.Drift {
		check.Drift = append(check.Drift, partmap.IndexDrift{Email: d.Email, Field: d.Field, Value: d.Value, Missing: d.Problem == "missing"})
	}
	return check, nil
}
