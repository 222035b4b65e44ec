// Command devserver runs the whole service on one port: every route of the
// HTTP API through the very handlers the Lambda functions serve, the sweep
// on a timer, and, when DATABASE_URL is unset, a Postgres of its own kept
// under .local/pg; with LOCAL_S3 set, a local S3 of its own too (moto, the
// bucket made as the template makes it). It checks at start what it can
// (the port, the database, the bucket) and stops with a message naming
// the setting and the fix. It prints an admin token, a ready workspace
// token, curl lines and the exports pendingctl needs; serves the example
// page (examples/upload.html, the browser client in one page) on a
// loopback port of its own, a second origin as the canvas's is; and runs
// an MQTT broker for push's upload hints (internal/push/localbroker).
// Ctrl-C stops everything it started.
//
// Settings are the functions' (docs/operating.md), plus PORT (default 8080),
// HOST, LOCAL_DIR (default .local: its Postgres, and the admin token, the
// download link key and the workspace kept across runs), LOCAL_S3, DEV_WORKSPACE_ID, EXAMPLES_PORT
// (the example page's port: PORT+100, or off) and PUSH_PORT (the
// broker's: PORT+1000).
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
