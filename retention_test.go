package partmap

import (
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]Retention{
		"24h":         {Age: 24 * time.Hour},
		"7d":          {Age: 7 * 24 * time.Hour},
		"1000000":     {Events: 1000000},
		"24h,1000000": {Age: 24 * time.Hour, Events: 1000000},
		"500, 90m":    {Age: 90 * time.Minute, Events: 500},
		"none":        {},
	} {
		got, err := ParseRetention(in)
		if err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseRetention(got.String()); err != nil || again != got {
			t.Errorf("%q: String() %q reads back as %+v, %v", in, got.String(), again, err)
		}
	}
	for _, in := range []string{"", "0", "-5", "1h,2h", "10,20", "soon", "3w", "0d", "1h,"} {
		if r, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) = %+v, want an error", in, r)
		}
	}
}
