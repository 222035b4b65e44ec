package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

const versionUsage = `Usage: pendingctl version   (or pendingctl --version)

Prints the version of pendingctl: the module's version, the commit it was
built from (with "modified" when the working tree had changes), the commit's
time, and the Go version and platform. A build without VCS stamping
(go build -buildvcs=false, or outside a git checkout) says "commit unknown".

Exit codes:
  0  printed
  2  usage error
`

func runVersion(_ context.Context, e env, args []string) error {
	fs := newFlags("version")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("version takes no arguments")
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprintln(e.stdout, versionLine(bi, ok))
	return nil
}

// versionLine describes the build from its build information, e.g.
//
//	pendingctl v1.4.0 commit 0123456789ab (modified) 2026-11-20T10:00:00Z go1.26.8 linux/amd64
func versionLine(bi *debug.BuildInfo, ok bool) string {
	version, goVersion := "(devel)", runtime.Version()
	settings := map[string]string{}
	if ok && bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pendingctl %s", version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, " commit %s", rev)
		if settings["vcs.modified"] == "true" {
			b.WriteString(" (modified)")
		}
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " %s", t)
		}
	} else {
		b.WriteString(" commit unknown")
	}
	fmt.Fprintf(&b, " %s %s/%s", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
