package client

import (
	"io"
	"sync"
)

// progress feeds one file's UploadFile.Progress: the bytes of the file
// sent so far, over every request that carries some of them. A nil
// *progress reports nothing.
type progress struct {
	mu   sync.Mutex
	fn   func(sent int64)
	sent int64
}

// newProgress returns f's progress, starting at base bytes (parts the
// bucket holds already), or nil when f has no Progress.
func newProgress(f UploadFile, base int64) *progress {
	if f.Progress == nil {
		return nil
	}
	p := &progress{fn: f.Progress, sent: base}
	if base > 0 {
		p.add(0)
	}
	return p
}

func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent += n
	p.fn(p.sent)
}

// tries counts the bytes of one body across the tries of its request:
// each new try takes back what the previous one counted, so a retried
// PUT starts its bytes over.
type tries struct {
	p    *progress
	last *counted
}

// wrap returns r counted as the body of a new try.
func (t *tries) wrap(r io.ReadCloser) io.ReadCloser {
	if t.p == nil {
		return r
	}
	if t.last != nil {
		t.last.retire()
	}
	t.last = &counted{ReadCloser: r, p: t.p}
	return t.last
}

// counted is a body whose reads count as sent until it is retired (the
// transport may still read a failed try's body after the answer).
type counted struct {
	io.ReadCloser
	p       *progress
	mu      sync.Mutex
	n       int64
	retired bool
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	if n > 0 {
		c.mu.Lock()
		if !c.retired {
			c.n += int64(n)
			c.p.add(int64(n))
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *counted) retire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.retired {
		c.retired = true
		c.p.add(-c.n)
	}
}
