package http_test

import (
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// The document states the default limits, as the README does: a profile's
// description lists them, and too-many-fields names its bound.
func TestOpenAPIStatesTheLimits(t *testing.T) {
	doc := loadOpenAPI(t)
	l := partmap.DefaultLimits
	profile := doc.Components.Schemas["Profile"].Value.Description
	want := "Limits, in bytes of UTF-8 by default: " + thousands(l.MaxFields) + " fields, " + thousands(l.MaxFieldNameBytes) +
		" per name, " + thousands(l.MaxFieldValueBytes) + " per value, " + thousands(l.MaxProfileBytes) +
		" for the whole profile, " + thousands(partmap.MaxEmailBytes) + " for the canonical email."
	if !strings.Contains(profile, want) {
		t.Errorf("the Profile schema says %q, want it to state %q", profile, want)
	}
	var tooMany string
	for name, s := range doc.Components.Schemas {
		if strings.HasPrefix(s.Value.Description, "413 `too-many-fields`") {
			tooMany = name
			if !strings.Contains(s.Value.Description, "("+thousands(l.MaxFields)+" by default") {
				t.Errorf("schema %s says %q, want the limit %s", name, s.Value.Description, thousands(l.MaxFields))
			}
		}
	}
	if tooMany == "" {
		t.Error("no schema describes too-many-fields")
	}
}
