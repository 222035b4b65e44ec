//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package client

// lockDir is a no-op where flock is not available: do not run two pulls
// into one directory there.
func lockDir(string) (func(), error) { return func() {}, nil }
