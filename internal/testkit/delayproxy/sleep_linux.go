package delayproxy

import (
	"syscall"
	"time"
)

// preciseSleep sleeps d with nanosleep(2), to the microsecond: the
// goroutine holds its thread meanwhile, and the runtime runs others on
// other threads.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
