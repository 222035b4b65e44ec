// Package throttle is a loopback TCP proxy that limits each connection
// to a rate, in each direction: a link whose bandwidth is bounded per
// connection (as a client's path to S3 often is, per TCP stream), in
// front of a local server (moto, for the benchmarks of uploads in
// parts). Parallel connections each get the rate, so what a client
// gains by sending in parallel shows.
//
// It is bounded: at most tcpproxy.MaxConns connections at once (more are
// refused), and one buffer of chunkSize bytes per direction.
package throttle

import (
	"net"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/tcpproxy"
)

// chunkSize is the most one direction of a connection holds, and its
// burst: at 8 MiB/s, 4 ms of traffic.
const chunkSize = 32 << 10

// Proxy forwards loopback connections to a target, each direction of
// each connection at most Rate bytes a second.
type Proxy struct {
	*tcpproxy.Proxy
	Rate int64 // bytes per second, per connection and direction
}

// Start listens on a free loopback port and forwards to target
// (host:port) at rate bytes a second per connection and direction; it
// stops at tb's cleanup.
func Start(tb testing.TB, target string, rate int64) *Proxy {
	tb.Helper()
	if rate <= 0 {
		tb.Fatalf("throttle: rate %d, want > 0", rate)
	}
	p := &Proxy{Rate: rate}
	p.Proxy = tcpproxy.Start(tb, "throttle", target, p.pipe)
	return p
}

// pipe copies src to dst at no more than Rate bytes a second (a token
// bucket of chunkSize). When src ends, dst's write side is closed; on an
// error, both are.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, chunkSize)
	tb := bucket{rate: float64(p.Rate), burst: chunkSize, tokens: chunkSize, last: time.Now()}
	for {
		n, err := src.Read(buf)
		if n > 0 {
			tb.take(n)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			tcpproxy.End(dst, err)
			return
		}
	}
}

// bucket is a token bucket: rate tokens (bytes) a second, at most burst
// saved up.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

// take waits until n tokens are there, and spends them.
func (b *bucket) take(n int) {
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	if b.tokens < 0 {
		time.Sleep(time.Duration(-b.tokens / b.rate * float64(time.Second)))
	}
}
