// Package pgpause stands in for a database that is not taking
// connections for a while: one restarting, failing over, or resuming
// from a pause (Aurora Serverless v2 at 0 ACUs resumes on the first
// connection it is asked for). It is a loopback proxy in front of
// Postgres (tcpproxy) that, while paused, accepts each new connection
// and closes it at once, before a byte of the server's, as a listener
// with no database behind it does; or, while holding, accepts each new
// connection and passes nothing either way until the hold ends, then
// serves it, as an endpoint that takes a connection and answers it once
// its database has resumed does. Connections made before either go on.
// It is bounded as tcpproxy is (a hold ends when its time is up), and
// stops at the test's cleanup.
package pgpause

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/tcpproxy"
)

// Proxy is a paused-or-not Postgres on a loopback port.
type Proxy struct {
	*tcpproxy.Proxy

	until   atomic.Int64 // unix nanoseconds the pause lasts until
	refused atomic.Int64

	holdUntil atomic.Int64 // unix nanoseconds the hold lasts until
	held      atomic.Int64
}

// Start listens on a free loopback port in front of target (host:port),
// not paused.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p := &Proxy{}
	p.Proxy = tcpproxy.Start(tb, "pgpause", target, p.pipe)
	return p
}

// PauseFor refuses every new connection for d from now.
func (p *Proxy) PauseFor(d time.Duration) { p.until.Store(time.Now().Add(d).UnixNano()) }

// Paused reports whether a new connection would be refused now.
func (p *Proxy) Paused() bool { return time.Now().UnixNano() < p.until.Load() }

// HoldFor holds every new connection for d from now: accepted, and not a
// byte passed either way until d has passed; then it is served.
func (p *Proxy) HoldFor(d time.Duration) { p.holdUntil.Store(time.Now().Add(d).UnixNano()) }

// Held is how many connections a hold held.
func (p *Proxy) Held() int64 { return p.held.Load() / 2 }

// Refused is how many connections the pause refused.
func (p *Proxy) Refused() int64 { return p.refused.Load() / 2 }

// pipe copies one direction of a connection, or, when the connection
// came while paused, closes both ends at once. Each connection has two
// pipes, so a refusal counts twice.
func (p *Proxy) pipe(dst, src net.Conn) {
	if p.Paused() {
		p.refused.Add(1)
		dst.Close()
		src.Close()
		return
	}
	if until := p.holdUntil.Load(); time.Now().UnixNano() < until {
		p.held.Add(1)
		time.Sleep(time.Until(time.Unix(0, until)))
	}
	_, err := io.Copy(dst, src)
	if err == nil {
		err = io.EOF
	}
	tcpproxy.End(dst, err)
}
