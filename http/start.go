package http

import (
	"context"
	"net/http"
	"net/url"
)

// startReply is the body of a start reply. Its fields are in alphabetical
// order, as the map that first encoded it sent them.
type startReply struct {
	AlreadyStarted bool `json:"alreadyStarted"`
	Started        bool `json:"started"` // always true
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request, q url.Values) error {
	now, err := s.store.Start(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, startReply{AlreadyStarted: !now, Started: true})
}

func (c *Client) Start(ctx context.Context) (bool, error) {
	var out startReply
	_, err := c.do(ctx, request{method: "POST", path: "/start"}, &out)
	return !out.AlreadyStarted && err == nil, err
}
