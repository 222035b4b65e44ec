// Package delayproxy is a loopback TCP proxy that delays every byte by a
// fixed time in each direction: a network's latency, without its
// bandwidth limit, in front of a local server (Postgres, for the
// benchmarks' latency mode). It is a delay line, not a sleep per read:
// bytes read at t leave at t+delay, whatever else is in flight, so
// throughput is the loopback's.
package delayproxy

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
	MaxConns = 64 // connections open at once; more are refused
	// chunkSize and queueLen bound what one direction of a connection
	// holds in flight: queueLen reads of up to chunkSize bytes.
	chunkSize = 64 << 10
	queueLen  = 256
)

// Proxy forwards loopback connections to a target, each direction
// delayed by Delay.
type Proxy struct {
	Addr  string // host:port it listens on (127.0.0.1)
	Delay time.Duration

	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target (host:port)
// with delay each way; it stops at tb's cleanup.
func Start(tb testing.TB, target string, delay time.Duration) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("delayproxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), Delay: delay, ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.Close)
	return p
}

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
		if len(p.conns) >= MaxConns {
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
