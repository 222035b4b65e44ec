package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pendinguploads/pendinguploads/client/humanize"
)

// progressMin is the smallest transfer that gets a progress bar.
const progressMin = 4 << 20

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// bar draws one transfer's progress on a terminal, at most ten times a
// second, on one line.
type bar struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	total int64
	n     int64
	base  int64 // bytes done before the bar began (not in its rate)
	start time.Time
	last  time.Time
	done  bool
}

func newBar(w io.Writer, label string, total int64) *bar { return newBarAt(w, label, total, 0) }

// newBarAt is a bar that starts at done bytes (a resumed transfer's):
// it is drawn there, and its rate counts only the bytes after them.
func newBarAt(w io.Writer, label string, total, done int64) *bar {
	if len(label) > 28 {
		label = label[:27] + "…"
	}
	b := &bar{w: w, label: label, total: total, n: done, base: done, start: time.Now()}
	b.draw()
	return b
}

func (b *bar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(len(p))
	if time.Since(b.last) >= 100*time.Millisecond {
		b.draw()
	}
	return len(p), nil
}

// set draws n bytes done of the total (it may go back: a request sent
// again takes its bytes back); nothing once the bar is done.
func (b *bar) set(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.n = n
	if time.Since(b.last) >= 100*time.Millisecond || n == b.total {
		b.draw()
	}
}

func (b *bar) Done(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	b.draw()
	if err != nil {
		fmt.Fprint(b.w, " failed")
	}
	fmt.Fprint(b.w, "\n")
}

func (b *bar) draw() {
	b.last = time.Now()
	const width = 30
	frac := 0.0
	if b.total > 0 {
		frac = min(float64(b.n)/float64(b.total), 1)
	}
	fill := int(frac * width)
	rate := ""
	if el := time.Since(b.start).Seconds(); el > 0.2 {
		rate = humanize.Bytes(int64(float64(max(b.n-b.base, 0))/el)) + "/s"
	}
	fmt.Fprintf(b.w, "\r%-28s [%s%s] %3.0f%% %s / %s %s\x1b[K", b.label,
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), frac*100,
		humanize.Bytes(b.n), humanize.Bytes(b.total), rate)
}
