// Command pendingctl is the operator and workspace CLI of pendinguploads:
// database chores (migrate, token, sweep) for operators, and upload, ls
// and pull over the HTTP API for the platform and the workspaces. Run
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
