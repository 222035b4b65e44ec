// Command devserver runs the whole service on one port: every route of the
// HTTP API through the very handlers the Lambda functions serve, the sweep
// on a timer, and, when DATABASE_URL is unset, a Postgres of its own kept
// under .local/pg. It prints an admin token, a ready workspace token and a
// curl line that stages a file. Ctrl-C stops everything it started.
//
// Settings are the functions' (see README.md), plus PORT (default 8080)
// and LOCAL_DIR (default .local) for where its own Postgres lives.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Getenv, os.Stdout, os.Stderr, nil))
}
