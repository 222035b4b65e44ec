// Package delayproxy is a loopback TCP proxy that delays every byte by a
// fixed time in each direction: a network's latency, without its
// bandwidth limit, in front of a local server (Postgres, for the
// benchmarks' latency mode). It is a delay line, not a sleep per read:
// bytes read at t leave at t+delay, whatever else is in flight, so
// throughput is the loopback's.
package delayproxy

import (
	"net"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/tcpproxy"
)

// chunkSize and queueLen bound what one direction of a connection holds
// in flight: queueLen reads of up to chunkSize bytes.
const (
	chunkSize = 64 << 10
	queueLen  = 256
)

// Proxy forwards loopback connections to a target, each direction
// delayed by Delay. At most tcpproxy.MaxConns connections at once.
type Proxy struct {
	*tcpproxy.Proxy
	Delay time.Duration
}

// Start listens on a free loopback port and forwards to target (host:port)
// with delay each way; it stops at tb's cleanup.
func Start(tb testing.TB, target string, delay time.Duration) *Proxy {
	tb.Helper()
	p := &Proxy{Delay: delay}
	p.Proxy = tcpproxy.Start(tb, "delayproxy", target, p.pipe)
	return p
}

// waitUntil returns at t. Go's timers may oversleep by a millisecond
// here (their granularity without epoll_pwait2), which would double a
// 0.5 ms delay; preciseSleep is the OS's own sleep where there is one.
func waitUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		preciseSleep(d)
	}
}

type chunk struct {
	at time.Time // when it may leave
	b  []byte
}

// pipe copies src to dst, each chunk leaving Delay after it was read.
// When either side ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	q := make(chan chunk, queueLen)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			waitUntil(c.at)
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				for range q { // drain, so the reader is not stuck
				}
				return
			}
		}
	}()
	for {
		buf := make([]byte, chunkSize)
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{time.Now().Add(p.Delay), buf[:n]}
		}
		if err != nil {
			close(q)
			<-done
			tcpproxy.End(dst, err)
			return
		}
	}
}
