package main

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one run of wrk --latency printed.
type wrkResult struct {
	Requests     int64   // completed, whatever their status
	PerSecond    float64 // "Requests/sec:"
	P50, P99     time.Duration
	Non2xx       int64 // "Non-2xx or 3xx responses:"; wrk prints it only when not 0
	SocketErrors int64 // connect, read, write and timeout errors together
}

// parseWrk reads wrk's report. Its times have the units us, ms, s and m,
// which time.ParseDuration reads as wrk means them.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var gotRate, gotCount bool
	inLatency := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case line == "Latency Distribution":
			inLatency = true
			continue
		case inLatency && len(f) == 2 && strings.HasSuffix(f[0], "%"):
			d, err := time.ParseDuration(f[1])
			if err != nil {
				return r, fmt.Errorf("wrk latency %q: %w", line, err)
			}
			switch f[0] {
			case "50%":
				r.P50 = d
			case "99%":
				r.P99 = d
			}
			continue
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("wrk %q: %w", line, err)
			}
			r.PerSecond, gotRate = v, true
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return r, fmt.Errorf("wrk %q: %w", line, err)
			}
			r.Requests, gotCount = n, true
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:") && len(f) == 5:
			n, err := strconv.ParseInt(f[4], 10, 64)
			if err != nil {
				return r, fmt.Errorf("wrk %q: %w", line, err)
			}
			r.Non2xx = n
		case strings.HasPrefix(line, "Socket errors:"):
			// "Socket errors: connect 0, read 1, write 0, timeout 2"
			for i := 2; i+1 < len(f); i += 2 {
				n, err := strconv.ParseInt(strings.TrimSuffix(f[i+1], ","), 10, 64)
				if err != nil {
					return r, fmt.Errorf("wrk %q: %w", line, err)
				}
				r.SocketErrors += n
			}
		}
		inLatency = false
	}
	switch {
	case !gotRate || !gotCount:
		return r, errors.New("wrk printed no request count or rate")
	case r.P50 == 0 || r.P99 == 0:
		return r, errors.New("wrk printed no latency distribution (run it with --latency)")
	}
	return r, nil
}
