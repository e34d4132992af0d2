package postgres

import (
	"strings"

	"github.com/partmap/partmap"
)

// profileText is a profile as JSON text for jsonb.
type profileText struct {
	text     string
	replaced bool // a U+0000 became U+FFFD
}

// profileJSON writes p as JSON. jsonb refuses \u0000, which a partmap
// profile may hold in a name or a value: it becomes U+FFFD.
func profileJSON(p partmap.Profile) (profileText, error) {
	replaced := false
	for k, v := range p {
		if strings.IndexByte(k, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			if !replaced {
				p, replaced = p.Clone(), true
			}
			delete(p, k)
			p[strings.ReplaceAll(k, "\x00", "\uFFFD")] = strings.ReplaceAll(v, "\x00", "\uFFFD")
		}
	}
	b, err := p.MarshalJSON()
	if err != nil {
		return profileText{}, err
	}
	return profileText{string(b), replaced}, nil
}
