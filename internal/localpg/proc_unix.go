//go:build unix

package localpg

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
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

// processAlive reports whether a process pid exists (it may belong to
// another user: EPERM still means it is there).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
