//go:build unix

package localpg

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// credential is who the server runs as when this process is root
// (postgres refuses to run as root).
type credential = syscall.Credential

// childAttr runs a short-lived child (initdb) as cred.
func childAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	return nil
}

func credentialFor(name string) (*credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// Freeze stops the server and all its processes with SIGSTOP, as a hung
// host would: connections stay open, nothing answers. Thaw resumes it.
// Fault tests use them; the cluster must be running.
func (c *Cluster) Freeze() error { return c.signalAll(syscall.SIGSTOP) }

// Thaw resumes a server stopped by Freeze (SIGCONT).
func (c *Cluster) Thaw() error { return c.signalAll(syscall.SIGCONT) }

// signalAll signals the postmaster, then its children. Each backend is a
// session leader of its own (postgres calls setsid), so the postmaster's
// process group does not reach them: they are found by parent in /proc.
// The postmaster goes first, so that, stopped, it forks no one new.
func (c *Cluster) signalAll(sig syscall.Signal) error {
	if c.cmd == nil || c.cmd.Process == nil {
		return errors.New("localpg: not running")
	}
	pid := c.cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("localpg: %v: %w", sig, err)
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
		return nil, fmt.Errorf("localpg: %w", err)
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

// processAlive reports whether a process pid exists (it may belong to
// another user: EPERM still means it is there).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
