//go:build !unix

package localpg

import (
	"errors"
	"syscall"
)

// credential is unused outside Unix: the server runs as this process.
type credential struct{}

func childAttr(*credential) *syscall.SysProcAttr  { return nil }
func serverAttr(*credential) *syscall.SysProcAttr { return nil }
func (c *Cluster) chown(string) error             { return nil }

func credentialFor(string) (*credential, error) {
	return nil, errors.New("localpg: running as another user needs a Unix system")
}

// processAlive cannot tell here: postgres's own check at start decides.
func processAlive(int) bool { return false }
