//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user and system, all
// threads): what a call costs this process, not Postgres's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
