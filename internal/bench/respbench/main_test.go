package main

import "testing"

func TestParseCSV(t *testing.T) {
	// redis-benchmark 7.0's --csv, after the warning partmap's missing
	// CONFIG makes it print.
	out := "WARNING: Could not fetch server CONFIG\n" +
		`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"` + "\n" +
		`"HSET u__rand_int__@x.io f v","13513.51","0.227","0.016","0.119","0.687","1.767","5.711"` + "\n"
	r, err := parseCSV(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps != 13513.51 || r.p50ms != 0.119 {
		t.Errorf("got %+v", r)
	}
	for name, bad := range map[string]string{
		"ErrNoTable": "Error: Connection refused\n",
		"ErrTwoRows": `"test","rps","p50_latency_ms"` + "\n" + `"A","1","2"` + "\n" + `"B","1","2"` + "\n",
		"ErrNoP50":   `"test","rps"` + "\n" + `"A","1"` + "\n",
		"ErrNumber":  `"test","rps","p50_latency_ms"` + "\n" + `"A","x","2"` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			if r, err := parseCSV(bad); err == nil {
				t.Errorf("got %+v, want an error", r)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	got, err := choose(workloads, "hget, HSET -P 16")
	if err != nil || len(got) != 2 || got[0].name != "HGET" || got[1].name != "HSET -P 16" {
		t.Fatalf("choose = %v, %v", got, err)
	}
	if all, err := choose(workloads, ""); err != nil || len(all) != len(workloads) {
		t.Fatalf("choose all = %v, %v", all, err)
	}
	if _, err := choose(workloads, "GET"); err == nil {
		t.Fatal("an unknown workload was accepted")
	}
}

func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		ratio, target float64
		want          string
	}{{0.95, 0.9, "≥ 0.9× | yes"}, {0.85, 0.9, "≥ 0.9× | no"}, {2, 0, " | "}} {
		if got := verdict(c.ratio, c.target); got != c.want {
			t.Errorf("verdict(%v, %v) = %q, want %q", c.ratio, c.target, got, c.want)
		}
	}
}
