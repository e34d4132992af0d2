package http

import (
	"context"
	"errors"

	"github.com/partmap/partmap"
)

// Placeholders until the routes land (branch expiry).
func (c *Client) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	return partmap.OperationResult{}, errors.New("not yet")
}

func (c *Client) Deadlines(ctx context.Context, email string, fields []string) (partmap.TTLs, error) {
	return partmap.TTLs{}, errors.New("not yet")
}
