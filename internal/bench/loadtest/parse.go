package main

import (
	"bufio"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parseStatTicks returns utime+stime, in clock ticks, from the text of
// /proc/PID/stat: the CPU the whole process (all its threads) has used.
func parseStatTicks(stat string) (int64, error) {
	// Field 2, the command name, is in parentheses and may hold spaces and
	// parentheses itself: the fields after the last ')' are plain.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return utime + stime, nil
}

// parseVmHWM returns the peak resident set size, in bytes, from the text
// of /proc/PID/status.
func parseVmHWM(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: VmHWM is %q", strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("/proc status: no VmHWM")
}

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

// median of xs, which it sorts; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
