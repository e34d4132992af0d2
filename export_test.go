package partmap

// QueuedWrites is how many writes wait for a group of GroupWrites's s.
func QueuedWrites(s Store) int {
	g := s.(*writeGroups)
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}
