package http

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/partmap/partmap"
)

// partitionJSON is one partition in use.
type partitionJSON struct {
	Name     string `json:"name"`
	Profiles int64  `json:"profiles"`
}

// partitionsReply is the body of GET /partitions.
type partitionsReply struct {
	Partitions      []partitionJSON `json:"partitions"`
	PartitionsInUse int             `json:"partitionsInUse"`
	TotalProfiles   int64           `json:"totalProfiles"`
	TotalPartitions int             `json:"totalPartitions"`
	Indexes         []string        `json:"indexes"`
}

func (s *Server) handleListPartitions(w http.ResponseWriter, r *http.Request, q url.Values) error {
	stats, err := s.store.ListPartitions(r.Context())
	if err != nil {
		return err
	}
	reply := partitionsReply{Partitions: make([]partitionJSON, len(stats.Partitions)),
		PartitionsInUse: len(stats.Partitions), TotalProfiles: stats.TotalProfiles,
		TotalPartitions: stats.TotalPartitions, Indexes: stats.Indexes}
	if reply.Indexes == nil {
		reply.Indexes = []string{}
	}
	for i, p := range stats.Partitions {
		reply.Partitions[i] = partitionJSON{p.Partition.String(), p.Profiles}
	}
	return writeJSON(w, http.StatusOK, reply)
}

func (c *Client) ListPartitions(ctx context.Context) (partmap.PartitionStats, error) {
	var out partitionsReply
	if _, err := c.do(ctx, request{method: "GET", path: "/partitions"}, &out); err != nil {
		return partmap.PartitionStats{}, err
	}
	stats := partmap.PartitionStats{TotalProfiles: out.TotalProfiles, TotalPartitions: out.TotalPartitions, Indexes: out.Indexes,
		Partitions: make([]partmap.PartitionCount, len(out.Partitions))}
	for i, p := range out.Partitions {
		n, err := strconv.ParseUint(strings.TrimPrefix(p.Name, "partition-"), 10, 32)
		if err != nil {
			return partmap.PartitionStats{}, fmt.Errorf("server sent a bad partition name %q", p.Name)
		}
		stats.Partitions[i] = partmap.PartitionCount{Partition: partmap.Partition(n), Profiles: p.Profiles}
	}
	return stats, nil
}
