package http

import (
	"context"
	"net/http"
	"net/url"
)

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request, q url.Values) error {
	now, err := s.store.Start(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]bool{"started": true, "alreadyStarted": !now})
}

func (c *Client) Start(ctx context.Context) (bool, error) {
	var out struct {
		AlreadyStarted bool `json:"alreadyStarted"`
	}
	_, err := c.do(ctx, request{method: "POST", path: "/start"}, &out)
	return !out.AlreadyStarted && err == nil, err
}
