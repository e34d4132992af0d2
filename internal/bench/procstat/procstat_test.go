package procstat_test

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/partmap/partmap/internal/bench/procstat"
)

func TestParseStatTicks(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		// utime 1234 and stime 56 are fields 14 and 15; the command name
		// holds a space and a ')'.
		stat := "4242 (part map) x) S 1 4242 4242 0 -1 4194560 9069 0 0 0 1234 56 0 0 20 0 12 0 1234567 1577000000 9000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
		got, err := procstat.ParseStatTicks(stat)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(1290); got != want {
			t.Errorf("got %d, want %d", got, want)
		}
	})
	for name, stat := range map[string]string{
		"ErrNoCommand": "4242 partmap S 1 4242",
		"ErrShort":     "4242 (partmap) S 1 4242 4242 0 -1 4194560 9069 0 0 0",
		"ErrNumber":    "4242 (partmap) S 1 4242 4242 0 -1 4194560 9069 0 0 0 12x4 56 0 0 20 0 12 0",
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := procstat.ParseStatTicks(stat); err == nil {
				t.Errorf("got %d, want an error", got)
			}
		})
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tpartmap\nVmPeak:\t 2000000 kB\nVmSize:\t 1900000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t  100000 kB\n"
	got, err := procstat.ParseVmHWM(status)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(123456 * 1024); got != want {
		t.Errorf("got %d, want %d", got, want)
	}
	if _, err := procstat.ParseVmHWM("Name:\tpartmap\n"); err == nil {
		t.Error("no VmHWM: got no error")
	}
}

// The test's own process has used some CPU, and holds some memory.
func TestOwnProcess(t *testing.T) {
	if _, err := procstat.CPUTicks(os.Getpid()); err != nil {
		t.Error(err)
	}
	if rss, err := procstat.PeakRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("peak RSS %d, %v", rss, err)
	}
	if tck, err := procstat.ClockTick(); err != nil || tck <= 0 {
		t.Errorf("clock tick %v, %v", tck, err)
	}
}

// A child's CPU counts in its parent's family, and not in the parent's own.
func TestFamilyCPUTicks(t *testing.T) {
	child := exec.Command("sh", "-c", "while :; do :; done") // busy until killed
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	tck, err := procstat.ClockTick()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// In this order, since the counts only grow: the family's, read
		// last, holds at least the other two.
		theirs, err3 := procstat.CPUTicks(child.Process.Pid)
		own, err1 := procstat.CPUTicks(os.Getpid())
		family, err2 := procstat.FamilyCPUTicks(os.Getpid())
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if theirs >= int64(tck/10) { // the child has run a tenth of a second
			if family < own+theirs {
				t.Fatalf("family %d ticks, own %d, the child's %d", family, own, theirs)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child used only %d ticks", theirs)
		}
	}
}
