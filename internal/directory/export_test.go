package directory

// SetFeedScan sets how many events one call reads past a filter, until
// the test ends.
func SetFeedScan(t interface{ Cleanup(func()) }, n int) {
	old := feedScan
	feedScan = n
	t.Cleanup(func() { feedScan = old })
}
