package redistest

import (
	"os"
	"path/filepath"
	"sync"
)

// Shared is what a test package's tests share: servers, each started at
// its first use in a temporary directory of its own, and other temporary
// directories. Stop, which TestMain calls after the tests, stops the
// servers and removes the directories.
type Shared struct {
	Prefix string // of the temporary directories' names

	serverOnce, clusterOnce sync.Once
	server                  *Server
	cluster                 *Cluster
	serverErr, clusterErr   error
	mu                      sync.Mutex
	dirs                    []string
}

// Server is the shared server, with one database.
func (sh *Shared) Server() (*Server, error) {
	sh.serverOnce.Do(func() {
		var dir string
		if dir, sh.serverErr = sh.TempDir(); sh.serverErr == nil {
			sh.server, sh.serverErr = StartServer(dir, 1)
		}
	})
	return sh.server, sh.serverErr
}

// Cluster is the shared Redis Cluster.
func (sh *Shared) Cluster() (*Cluster, error) {
	sh.clusterOnce.Do(func() {
		var dir string
		if dir, sh.clusterErr = sh.TempDir(); sh.clusterErr == nil {
			sh.cluster, sh.clusterErr = StartCluster(filepath.Join(dir, "cluster"))
		}
	})
	return sh.cluster, sh.clusterErr
}

// TempDir makes a temporary directory that Stop removes.
func (sh *Shared) TempDir() (string, error) {
	dir, err := os.MkdirTemp("", sh.Prefix)
	if err == nil {
		sh.mu.Lock()
		sh.dirs = append(sh.dirs, dir)
		sh.mu.Unlock()
	}
	return dir, err
}

// Stop stops the servers that started, and starts none, and removes
// their directories.
func (sh *Shared) Stop() {
	sh.serverOnce.Do(func() {})
	sh.clusterOnce.Do(func() {})
	if sh.server != nil {
		sh.server.Stop()
	}
	if sh.cluster != nil {
		sh.cluster.Stop()
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, dir := range sh.dirs {
		os.RemoveAll(dir)
	}
}
