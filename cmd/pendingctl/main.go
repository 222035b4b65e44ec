// Command pendingctl is the operator and workspace CLI of pendinguploads:
// chores for operators (migrate, token and sweep on the database; token
// also through a stack's admin function), and upload, ls, pull and smoke
// over the HTTP API for the platform and the workspaces; version. Run
// `pendingctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
