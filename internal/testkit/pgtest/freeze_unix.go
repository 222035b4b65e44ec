//go:build unix

package pgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Freeze stops this binary's throwaway cluster, the server and all its
// processes, with SIGSTOP, as a hung host would: connections stay open,
// nothing answers. Thaw resumes it. A fault test that freezes Postgres
// needs a test binary (and so a cluster) of its own; with
// TEST_DATABASE_URL set there is nothing to freeze, and it fails.
func Freeze() error { return signalAll(syscall.SIGSTOP) }

// Thaw resumes a cluster stopped by Freeze (SIGCONT).
func Thaw() error { return signalAll(syscall.SIGCONT) }

// signalAll signals the postmaster, then its children. Each backend is a
// session leader of its own (postgres calls setsid), so the postmaster's
// process group does not reach them: they are found by parent in /proc.
// The postmaster goes first, so that, stopped, it forks no one new.
func signalAll(sig syscall.Signal) error {
	if cluster == nil || cluster.PID() == 0 {
		return errors.New("pgtest: no cluster of this binary is running")
	}
	pid := cluster.PID()
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("pgtest: %v: %w", sig, err)
	}
	kids, err := children(pid)
	if err != nil {
		return err
	}
	for _, k := range kids {
		_ = syscall.Kill(k, sig) // a backend may have exited meanwhile
	}
	return nil
}

// children returns the processes whose parent is pid, from /proc.
func children(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// "pid (comm) state ppid ...": comm may hold anything, so parse
		// after its last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out, nil
}
