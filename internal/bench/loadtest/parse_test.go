package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// wrk 4.1.0's report with --latency, as Debian's wrk prints it.
const wrkOK = `Running 8s test @ http://127.0.0.1:40123/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.12ms    1.90ms  45.01ms   89.12%
    Req/Sec    10.51k   812.33    12.10k    71.25%
  Latency Distribution
     50%    2.80ms
     75%    3.61ms
     90%    4.90ms
     99%   10.07ms
  167340 requests in 8.00s, 35.11MB read
Requests/sec:  20914.52
Transfer/sec:      4.39MB
`

func TestParseWrk(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		got, err := parseWrk(wrkOK)
		if err != nil {
			t.Fatal(err)
		}
		want := wrkResult{Requests: 167340, PerSecond: 20914.52, P50: 2800 * time.Microsecond, P99: 10070 * time.Microsecond}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("OKErrorsAndUnits", func(t *testing.T) {
		out := `  Latency Distribution
     50%  812.00us
     75%    1.00ms
     90%    1.50s
     99%    2.00m
  100 requests in 8.00s, 1.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 7
Requests/sec:     12.50
`
		got, err := parseWrk(out)
		if err != nil {
			t.Fatal(err)
		}
		want := wrkResult{Requests: 100, PerSecond: 12.5, P50: 812 * time.Microsecond, P99: 2 * time.Minute, Non2xx: 7, SocketErrors: 5}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("ErrNoLatency", func(t *testing.T) {
		out := "  100 requests in 8.00s, 1.00MB read\nRequests/sec:     12.50\n"
		if _, err := parseWrk(out); err == nil {
			t.Error("got no error")
		}
	})
	t.Run("ErrNoRate", func(t *testing.T) {
		if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
			t.Error("got no error")
		}
	})
}

func TestParsePhases(t *testing.T) {
	c, err := parseConfig([]string{"--phases", "put, get,put"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.phases) != 2 || c.phases[0].name != "put" || c.phases[1].name != "get" {
		t.Fatalf("--phases put, get,put: %v", c.phases)
	}
	if c, _ := parseConfig(nil, io.Discard); len(c.phases) != 3 {
		t.Fatalf("no --phases: %d phases, want all 3", len(c.phases))
	}
	if _, err := parseConfig([]string{"--phases", "put,post"}, io.Discard); err == nil || !strings.Contains(err.Error(), `"post"`) {
		t.Fatalf("--phases put,post: %v", err)
	}
	if c, err := parseConfig([]string{"--phases", "put,postgres"}, io.Discard); err != nil || !c.postgres || len(c.phases) != 1 {
		t.Fatalf("--phases put,postgres: %+v %v", c, err)
	}
	if _, err := parseConfig([]string{"--phases", "get,postgres"}, io.Discard); err == nil {
		t.Fatal("--phases get,postgres: postgres without put accepted")
	}
}
