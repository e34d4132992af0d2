package http

import (
	"net/http"
	"time"
)

// Mux exposes the router to the tests, which read the patterns registered on
// it to check that the OpenAPI document describes every route.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// SetSSEHeartbeat shortens the event stream's heartbeat for a test, and
// puts it back when the test ends. Call it before starting the server, so
// that the server has stopped when it is put back, and not in parallel
// tests.
func SetSSEHeartbeat(t interface{ Cleanup(func()) }, d time.Duration) {
	old := sseHeartbeat
	sseHeartbeat = d
	t.Cleanup(func() { sseHeartbeat = old })
}
