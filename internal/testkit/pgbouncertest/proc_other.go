//go:build !linux

package pgbouncertest

import (
	"errors"
	"os"
	"syscall"
)

type credential struct{}

// supported: the tests run PgBouncer on Linux only.
const supported = false

func procAttr() (*syscall.SysProcAttr, *credential, error) {
	return nil, nil, errors.New("pgbouncertest: Linux only")
}

func chown(string, *credential) error { return nil }

func signalGroup(p *os.Process, _ syscall.Signal) { _ = p.Kill() }
