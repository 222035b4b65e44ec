package lambdatest

import (
	"bytes"
	"sync"
)

// output keeps the last max bytes a process wrote to stdout and stderr,
// interleaved as written. It is safe for concurrent use.
type output struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, p...)
	if over := len(o.buf) - o.max; over > 0 {
		o.buf = append(o.buf[:0], o.buf[over:]...)
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

// tail returns about the last n bytes, from the start of a line.
func (o *output) tail(n int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.buf
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return string(b)
}
