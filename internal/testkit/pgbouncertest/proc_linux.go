package pgbouncertest

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// credential is who PgBouncer runs as, when not as this process.
type credential = syscall.Credential

// supported: PgBouncer runs here (Linux, where the kernel stops it with
// the test process).
const supported = true

// procAttr runs PgBouncer in a process group of its own, SIGKILLed by
// the kernel when the (locked) thread that started it dies with the test
// process, and as the "postgres" user when this process is root:
// PgBouncer refuses to run as root.
func procAttr() (*syscall.SysProcAttr, *credential, error) {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		return attr, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, nil, fmt.Errorf("running as root needs a %q user for PgBouncer: %w", "postgres", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	return attr, attr.Credential, nil
}

// chown gives path to cred (nil: leaves it).
func chown(path string, cred *credential) error {
	if cred == nil {
		return nil
	}
	return os.Chown(path, int(cred.Uid), int(cred.Gid))
}

// signalGroup sends sig to p's process group.
func signalGroup(p *os.Process, sig syscall.Signal) { _ = syscall.Kill(-p.Pid, sig) }
