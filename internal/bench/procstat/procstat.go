// Package procstat reads what Linux's /proc tells of a process the
// benchmarks measure from outside: the CPU it has used and its peak
// resident set.
package procstat

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// CPUTicks is utime+stime of process pid, in clock ticks (ClockTick).
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStatTicks(string(b))
}

// FamilyCPUTicks is CPUTicks of process pid and of each of its children
// now running: a server of many processes, as PostgreSQL's postmaster and
// its backends are. A child that has exited no longer counts.
func FamilyCPUTicks(pid int) (int64, error) {
	total, err := CPUTicks(pid)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		f, err := statFields(string(b))
		if err != nil {
			return 0, err
		}
		if ppid, err := strconv.Atoi(f[4-3]); err != nil || ppid != pid {
			continue
		}
		ticks, err := statTicks(f)
		if err != nil {
			return 0, err
		}
		total += ticks
	}
	return total, nil
}

// statFields are the fields of the text of /proc/PID/stat from field 3,
// the state, on: f[n-3] is field n as proc(5) counts them.
func statFields(stat string) ([]string, error) {
	// Field 2, the command name, is in parentheses and may hold spaces and
	// parentheses itself: the fields after the last ')' are plain.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return nil, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	return f, nil
}

// statTicks is utime+stime (fields 14 and 15) of statFields.
func statTicks(f []string) (int64, error) {
	utime, err1 := strconv.ParseInt(f[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return utime + stime, nil
}

// PeakRSS is process pid's peak resident set size (VmHWM), in bytes.
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseVmHWM(string(b))
}

// ClockTick is the number of clock ticks in a second (getconf CLK_TCK).
func ClockTick() (float64, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK: %w", err)
	}
	tck, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || tck <= 0 {
		return 0, fmt.Errorf("getconf CLK_TCK said %q", out)
	}
	return tck, nil
}

// ParseStatTicks returns utime+stime, in clock ticks, from the text of
// /proc/PID/stat: the CPU the whole process (all its threads) has used.
func ParseStatTicks(stat string) (int64, error) {
	f, err := statFields(stat)
	if err != nil {
		return 0, err
	}
	return statTicks(f)
}

// ParseVmHWM returns the peak resident set size, in bytes, from the text
// of /proc/PID/status.
func ParseVmHWM(status string) (int64, error) {
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

// Session is a measuring command's scratch directory, which Close
// removes, the clock tick that CPUTicks counts in, and a log that stamps
// each line with the time.
type Session struct {
	Dir       string
	ClockTick float64
	Logf      func(format string, a ...any)
}

// NewSession starts a session of the command name, logging to w.
func NewSession(name string, w io.Writer) (*Session, error) {
	tck, err := ClockTick()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "partmap-"+name+"-")
	if err != nil {
		return nil, err
	}
	return &Session{Dir: dir, ClockTick: tck, Logf: func(format string, a ...any) {
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}}, nil
}

// Close removes the scratch directory.
func (s *Session) Close() error { return os.RemoveAll(s.Dir) }
