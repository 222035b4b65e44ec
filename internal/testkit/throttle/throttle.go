// Package throttle is a loopback TCP proxy that limits each connection
// to a rate, in each direction: a link whose bandwidth is bounded per
// connection (as a client's path to S3 often is, per TCP stream), in
// front of a local server (moto, for the benchmarks of uploads in
// parts). Parallel connections each get the rate, so what a client
// gains by sending in parallel shows.
//
// It is bounded: at most MaxConns connections at once (more are
// refused), and one buffer of chunkSize bytes per direction.
package throttle

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Limits of one proxy.
const (
	MaxConns = 64
	// chunkSize is the most one direction of a connection holds, and its
	// burst: at 8 MiB/s, 4 ms of traffic.
	chunkSize = 32 << 10
)

// Proxy forwards loopback connections to a target, each direction of
// each connection at most Rate bytes a second.
type Proxy struct {
	Addr string // host:port it listens on (127.0.0.1)
	Rate int64  // bytes per second, per connection and direction

	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target
// (host:port) at rate bytes a second per connection and direction; it
// stops at tb's cleanup.
func Start(tb testing.TB, target string, rate int64) *Proxy {
	tb.Helper()
	if rate <= 0 {
		tb.Fatalf("throttle: rate %d, want > 0", rate)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("throttle: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), Rate: rate, ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.Close)
	return p
}

// URL is the proxy's address as an http:// base URL.
func (p *Proxy) URL() string { return "http://" + p.Addr }

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if len(p.conns) >= 2*MaxConns { // each connection is two sockets
			return false
		}
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client, true) {
			client.Close()
			continue
		}
		p.wg.Go(func() {
			defer p.track(client, false)
			defer client.Close()
			server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil {
				return
			}
			if !p.track(server, true) {
				server.Close()
				return
			}
			defer p.track(server, false)
			defer server.Close()
			var dirs sync.WaitGroup
			dirs.Go(func() { p.pipe(server, client) })
			dirs.Go(func() { p.pipe(client, server) })
			dirs.Wait()
		})
	}
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
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
					return
				}
			}
			dst.Close()
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
