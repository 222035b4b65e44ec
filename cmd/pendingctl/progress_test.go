package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestBar(t *testing.T) {
	var buf bytes.Buffer
	b := newBar(&buf, "↓ big.bin", 8<<20)
	b.Write(make([]byte, 4<<20))
	b.Write(make([]byte, 4<<20))
	b.Done(nil)
	out := buf.String()
	if !strings.Contains(out, "100%") || !strings.Contains(out, "8.0 MiB / 8.0 MiB") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("got %q", out)
	}
	b.Done(errors.New("again")) // a second Done draws nothing
	if buf.String() != out {
		t.Fatalf("second Done drew: %q", buf.String()[len(out):])
	}
}

func TestNoBarWhenNotATerminal(t *testing.T) {
	a := apiFlags{}
	if a.showBars(env{stderr: io.Discard}) {
		t.Fatal("got a bar on a non-terminal")
	}
}

// TestBarOfResumedUpload: a resumed upload's bar starts at the bytes the
// bucket holds already (its first frame says 48%, never 0%), and its rate
// counts only what this run sends.
func TestBarOfResumedUpload(t *testing.T) {
	var buf bytes.Buffer
	l := &lazyBar{w: &buf, label: "↑ big.bin", total: 21 << 20}
	l.set(10 << 20) // the client's first report: the parts held
	first := buf.String()
	if !strings.Contains(first, " 48% 10.0 MiB / 21.0 MiB") || strings.Contains(first, " 0%") {
		t.Fatalf("first frame: got %q, want it at 48%%, 10.0 MiB", first)
	}
	l.b.start = l.b.start.Add(-time.Second) // a second later, 1 MiB more
	l.b.last = time.Time{}
	l.set(11 << 20)
	out := buf.String()[len(first):]
	if !strings.Contains(out, "11.0 MiB / 21.0 MiB 1.0 MiB/s") && !strings.Contains(out, "11.0 MiB / 21.0 MiB 102") {
		t.Fatalf("a second later: got %q, want about 1 MiB/s (not the held bytes' rate)", out)
	}
	l.done(nil)
}
