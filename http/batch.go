package http

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/partmap/partmap"
)

// The batch lookup takes its emails in a body, not in the query: a
// thousand addresses would not fit in a URL. The body is
// {"emails": [...], "fields": [...]}, fields optional.
const (
	batchEmails = "emails"
	batchFields = "fields"
)

// batchReply is the body of a batch lookup: the profiles (or projections)
// in the order asked, null for a missing one, and beside them their ETags,
// in the form of the ETag header, null where the profile is; and, for
// whole profiles, when each was last committed, as a change's time (null
// where the store does not know).
type batchReply struct {
	profiles  []json.Marshaler // nil: missing
	versions  []partmap.Version
	committed []int64 // Unix ms, 0 unknown; nil for projections
}

// MarshalJSON writes the reply directly: profiles write their own JSON,
// and passing a thousand of them through encoding/json would only
// validate and copy them again.
func (b batchReply) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	// list writes one array member of the reply: null where missing says
	// so, else what write writes.
	list := func(name string, n int, missing func(i int) bool, write func(i int)) {
		buf.WriteString(name)
		for i := range n {
			if i > 0 {
				buf.WriteByte(',')
			}
			if missing(i) {
				buf.WriteString("null")
			} else {
				write(i)
			}
		}
	}
	absent := func(i int) bool { return b.profiles[i] == nil }
	var err error
	list(`{"profiles":[`, len(b.profiles), absent, func(i int) {
		j, jerr := b.profiles[i].MarshalJSON()
		err = cmp.Or(err, jerr)
		buf.Write(j)
	})
	if err != nil {
		return nil, err
	}
	list(`],"etags":[`, len(b.profiles), absent, func(i int) { buf.WriteString(strconv.Quote(b.versions[i].ETag())) })
	if b.committed != nil {
		list(`],"committed":[`, len(b.committed), func(i int) bool { return b.committed[i] == 0 }, func(i int) {
			buf.WriteString(strconv.Quote(time.UnixMilli(b.committed[i]).UTC().Format(changeTime)))
		})
	}
	buf.WriteString(`]}`)
	return buf.Bytes(), nil
}

// handleGetProfiles looks up many profiles at once. Nothing is answered
// unless every email and field is good.
func (s *Server) handleGetProfiles(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	lists, err := readJSON(s, w, r, partmap.ParseStringListsJSON, "application/json")
	if err != nil {
		return err
	}
	for name := range lists {
		if name != batchEmails && name != batchFields {
			return partmap.Errorf(partmap.EMALFORMEDJSON, "unknown member %q; the body takes %q and, optionally, %q", name, batchEmails, batchFields)
		}
	}
	emails, ok := lists[batchEmails]
	if !ok {
		return partmap.Errorf(partmap.EINVALID, `the body names no emails; send {"emails": ["a@example.com", ...]}`)
	}
	reply := batchReply{profiles: make([]json.Marshaler, len(emails)), versions: make([]partmap.Version, len(emails))}
	if fields, project := lists[batchFields]; project {
		projs, err := s.store.ProjectProfiles(r.Context(), emails, fields)
		if err != nil {
			return err
		}
		for i, p := range projs {
			if p != nil {
				reply.profiles[i], reply.versions[i] = *p, p.Version
			}
		}
	} else {
		recs, err := s.store.FindProfiles(r.Context(), emails)
		if err != nil {
			return err
		}
		reply.committed = make([]int64, len(emails))
		for i, rec := range recs {
			if rec != nil {
				reply.profiles[i], reply.versions[i], reply.committed[i] = rec.Profile, rec.Version, rec.Committed
			}
		}
	}
	return writeJSON(w, http.StatusOK, reply)
}

// batchWire is a batch reply as the client reads it: each profile is
// decoded by the strict decoder of its kind.
type batchWire struct {
	Profiles  []json.RawMessage `json:"profiles"`
	ETags     []*string         `json:"etags"`
	Committed []*string         `json:"committed"` // absent from a projection's, and from older servers'
}

// getMany sends one batch lookup and returns each answer's JSON (nil for a
// missing profile), version and commit time (0 when not sent). The emails
// and fields are checked here as the store checks them: JSON cannot carry
// bytes that are not UTF-8, and a request bound to fail need not be sent.
func (c *Client) getMany(ctx context.Context, emails, fields []string) ([]json.RawMessage, []partmap.Version, []int64, error) {
	if _, err := partmap.CanonicalEmails(emails); err != nil {
		return nil, nil, nil, err
	}
	req := map[string][]string{batchEmails: emails}
	if fields != nil {
		if err := partmap.CheckBatchFields(fields); err != nil {
			return nil, nil, nil, err
		}
		req[batchFields] = fields
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, nil, err
	}
	var out batchWire
	if _, err := c.do(ctx, request{method: "POST", path: "/customer-profiles/get", body: body}, &out); err != nil {
		return nil, nil, nil, err
	}
	if len(out.Profiles) != len(emails) || len(out.ETags) != len(emails) {
		return nil, nil, nil, fmt.Errorf("batch reply has %d profiles and %d ETags for %d emails", len(out.Profiles), len(out.ETags), len(emails))
	}
	if out.Committed != nil && len(out.Committed) != len(emails) {
		return nil, nil, nil, fmt.Errorf("batch reply has %d commit times for %d emails", len(out.Committed), len(emails))
	}
	var committed []int64
	if out.Committed != nil {
		committed = make([]int64, len(emails))
	}
	versions := make([]partmap.Version, len(emails))
	for i, raw := range out.Profiles {
		missing := bytes.Equal(raw, []byte("null"))
		if missing != (out.ETags[i] == nil) {
			return nil, nil, nil, fmt.Errorf("batch reply: profile %d and its ETag disagree on whether it exists", i)
		}
		if missing {
			out.Profiles[i] = nil
			continue
		}
		if versions[i], err = partmap.ParseETag(*out.ETags[i]); err != nil {
			return nil, nil, nil, fmt.Errorf("batch reply: profile %d: %w", i, err)
		}
		if committed != nil && out.Committed[i] != nil {
			t, err := time.Parse(changeTime, *out.Committed[i])
			if err != nil {
				return nil, nil, nil, fmt.Errorf("batch reply: profile %d: a bad commit time %q", i, *out.Committed[i])
			}
			committed[i] = t.UnixMilli()
		}
	}
	return out.Profiles, versions, committed, nil
}

func (c *Client) FindProfiles(ctx context.Context, emails []string) ([]*partmap.Record, error) {
	raws, versions, committed, err := c.getMany(ctx, emails, nil)
	if err != nil {
		return nil, err
	}
	return decodeFound(raws, func(i int, raw json.RawMessage) (*partmap.Record, error) {
		rec := &partmap.Record{Version: versions[i]}
		if committed != nil {
			rec.Committed = committed[i]
		}
		if err := rec.Profile.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("batch reply: profile %d: %w", i, err)
		}
		return rec, nil
	})
}

func (c *Client) ProjectProfiles(ctx context.Context, emails []string, fields []string) ([]*partmap.Projection, error) {
	if fields == nil {
		fields = []string{} // refused as empty, not sent as a whole-profile lookup
	}
	raws, versions, _, err := c.getMany(ctx, emails, fields)
	if err != nil {
		return nil, err
	}
	return decodeFound(raws, func(i int, raw json.RawMessage) (*partmap.Projection, error) {
		p := &partmap.Projection{Version: versions[i]}
		if err := p.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("batch reply: projection %d: %w", i, err)
		}
		if !slices.Equal(p.Fields, fields) {
			return nil, fmt.Errorf("batch reply: projection %d has fields %q, not those asked for", i, p.Fields)
		}
		return p, nil
	})
}

// decodeFound decodes each profile getMany found, nil for a missing one.
func decodeFound[T any](raws []json.RawMessage, decode func(i int, raw json.RawMessage) (*T, error)) ([]*T, error) {
	out := make([]*T, len(raws))
	for i, raw := range raws {
		if raw == nil {
			continue
		}
		v, err := decode(i, raw)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
