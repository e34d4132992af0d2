package stats_test

import (
	"log"
	"os"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/stats"
)

// A map of 8 partitions whose store lists two in use: the others count as
// empty.
func Example() {
	ps := partmap.PartitionStats{TotalPartitions: 8, Partitions: []partmap.PartitionCount{
		{Partition: 1, Profiles: 3},
		{Partition: 5, Profiles: 1},
	}}
	sizes, err := stats.Sizes(ps)
	if err != nil {
		log.Fatal(err)
	}
	r := stats.Summarize(sizes, 2)
	if err := r.WriteText(os.Stdout, 40); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 4 profiles in 8 partitions: 2 in use, 6 empty
	// profiles per partition: min 0, median 0, p99 3, max 3 (nearest rank)
	// mean 0.50, stddev 1.00, cv 2.000
	// uniform hash: 0.50 ± 0.66 per partition; chi-square 16.0 on 7 df (too few profiles per partition for a p-value)
	//
	// largest partitions:
	//   partition-001  3
	//   partition-005  1
	//
	// histogram (profiles per partition, number of partitions):
	// 0 6 │███████████████████████████████████
	// 1 1 │█████▉
	// 2 0 │
	// 3 1 │█████▉
}
