package throttle_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/throttle"
)

// sink serves a loopback server that reads each connection to its end
// and answers with the byte count's low byte, then closes.
func sink(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				c.Write([]byte{byte(n)})
			}()
		}
	}()
	return ln.Addr().String()
}

// send writes n bytes through the proxy and waits for the answer.
func send(t *testing.T, addr string, n int) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(bytes.Repeat([]byte{7}, n)); err != nil {
		t.Error(err)
		return
	}
	c.(*net.TCPConn).CloseWrite()
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != byte(n) {
		t.Errorf("answer %d, %v; want %d", b[0], err, byte(n))
	}
}

// TestRatePerConnection: 1 MiB at 4 MiB/s takes about 250 ms on one
// connection, and about as long on each of four at once (each connection
// gets the rate).
func TestRatePerConnection(t *testing.T) {
	const rate, n = 4 << 20, 1 << 20
	p := throttle.Start(t, sink(t), rate)
	for _, conns := range []int{1, 4} {
		start := time.Now()
		var wg sync.WaitGroup
		for range conns {
			wg.Go(func() { send(t, p.Addr, n) })
		}
		wg.Wait()
		took := time.Since(start)
		if took < 200*time.Millisecond || took > 2*time.Second {
			t.Errorf("%d connections of 1 MiB at 4 MiB/s: %v, want about 250ms", conns, took)
		}
	}
}
