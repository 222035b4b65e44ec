package main

import (
	"bytes"
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	stamped := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/pendinguploads/pendinguploads", Version: "v1.4.0"},
			Settings: []debug.BuildSetting{
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
				{Key: "vcs.time", Value: "2026-11-20T10:00:00Z"},
				{Key: "vcs.modified", Value: modified},
			},
		}
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"Clean", stamped("false"), true,
			"pendingctl v1.4.0 commit 0123456789abcdef0123456789abcdef01234567 2026-11-20T10:00:00Z go1.26.8" + platform},
		{"Dirty", stamped("true"), true,
			"pendingctl v1.4.0 commit 0123456789abcdef0123456789abcdef01234567 (modified) 2026-11-20T10:00:00Z go1.26.8" + platform},
		{"NoVCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true,
			"pendingctl (devel) commit unknown go1.26.8" + platform},
		{"NoBuildInfo", nil, false, "pendingctl (devel) commit unknown " + runtime.Version() + platform},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(tt.bi, tt.ok); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestVersionCommand: `pendingctl version` and `pendingctl --version` print
// the same line, from this binary's build information, and exit 0.
func TestVersionCommand(t *testing.T) {
	var lines []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, func(string) string { return "" }, &out, &errb)
		if code != exitOK || errb.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		lines = append(lines, out.String())
	}
	bi, ok := debug.ReadBuildInfo()
	if want := versionLine(bi, ok) + "\n"; lines[0] != want || lines[1] != want {
		t.Errorf("got %q and %q, want %q", lines[0], lines[1], want)
	}
	if !strings.HasPrefix(lines[0], "pendingctl ") || !strings.Contains(lines[0], runtime.Version()) {
		t.Errorf("got %q, want pendingctl, its version and %s", lines[0], runtime.Version())
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version", "extra"}, func(string) string { return "" }, &out, &errb); code != exitUsage {
		t.Errorf("version extra: exit %d, want %d", code, exitUsage)
	}
}
