package delayproxy_test

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/delayproxy"
)

// echo serves one loopback echo server for the test.
func echo(t *testing.T) string {
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
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// TestRoundTripIsDelayed: a round trip through the proxy takes at least
// twice the delay, and the bytes come back unchanged and in order, 4 MiB
// of them included.
func TestRoundTripIsDelayed(t *testing.T) {
	const delay = 20 * time.Millisecond
	p := delayproxy.Start(t, echo(t), delay)
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 5)
	start := time.Now()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
	if rtt := time.Since(start); rtt < 2*delay {
		t.Fatalf("round trip %v, want at least %v", rtt, 2*delay)
	}
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	go c.Write(big)
	got := make([]byte, len(big))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("4 MiB through the proxy: %v, equal %v", err, bytes.Equal(got, big))
	}
}
