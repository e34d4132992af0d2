package partmap_test

import (
	"testing"

	"github.com/partmap/partmap"
)

func TestMapPartitions(t *testing.T) {
	for _, tc := range []struct {
		stats partmap.PartitionStats
		want  int
	}{
		{partmap.PartitionStats{TotalPartitions: 4000}, 4000},
		{partmap.PartitionStats{TotalPartitions: 1, Partitions: []partmap.PartitionCount{{Partition: 0, Profiles: 3}}}, 1},
		{partmap.PartitionStats{}, partmap.DefaultPartitions}, // a server from before totalPartitions
	} {
		if got := tc.stats.MapPartitions(); got != tc.want {
			t.Errorf("%+v: got %d, want %d", tc.stats, got, tc.want)
		}
	}
}
