package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
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
