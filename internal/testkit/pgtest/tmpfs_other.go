//go:build !linux

package pgtest

import (
	"os"
	"strconv"
)

// clusterParent returns "" (the system's temporary folder) where there is
// no /dev/shm to prefer; see tmpfs_linux.go.
func clusterParent() string { return "" }

// dirPattern is os.MkdirTemp's pattern for this process's cluster folder.
func dirPattern() string { return "pendinguploads-pg-" + strconv.Itoa(os.Getpid()) + "-" }
