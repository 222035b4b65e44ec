// Package tcpproxy is the loopback TCP proxy the test kit's simulated
// links share (delayproxy: latency; throttle: bandwidth): it listens on a
// free loopback port, forwards each connection to a target, and hands
// each direction of each connection to a Pipe, which decides how its
// bytes cross.
//
// It is bounded: at most MaxConns connections at once (more are refused),
// and it stops by itself at the test's cleanup.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// MaxConns is how many connections one proxy forwards at once.
const MaxConns = 64

// Pipe copies src to dst, its own way, until src ends or either fails;
// then it ends dst (End).
type Pipe func(dst, src net.Conn)

// Proxy forwards loopback connections to a target through a Pipe.
type Proxy struct {
	Addr string // host:port it listens on (127.0.0.1)

	ln     net.Listener
	target string
	pipe   Pipe
	mu     sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target
// (host:port) through pipe; it stops at tb's cleanup. name prefixes its
// failures.
func Start(tb testing.TB, name, target string, pipe Pipe) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target, pipe: pipe, conns: map[net.Conn]bool{}}
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

// End ends dst once its source ended with err: its write side when the
// source reached EOF (the other direction goes on), all of it otherwise.
func End(dst net.Conn, err error) {
	if errors.Is(err, io.EOF) {
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
			return
		}
	}
	dst.Close()
}
