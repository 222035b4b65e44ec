package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/app"
)

const linkkeyUsage = `Usage: pendingctl linkkey rotate [flags]

Rotate the key download links are signed with, where the service keeps it
by default: the database (download_link_keys; a deployment that sets
DOWNLOAD_LINK_KEY or DOWNLOAD_LINK_KEY_SECRET_ARN rotates that instead,
docs/operating.md). One statement adds a new key, drawn by Postgres from
its strong random source, and deletes the keys older than the one it
replaces. Links signed with the replaced key keep opening for
DOWNLOAD_LINK_TTL plus a minute; every instance signs with the new key
within a minute. Rotating again within that overlap voids the first
rotation's links. The key is never printed: only its id, which links
carry (their key= parameter).

Flags:
  --json             print {"key_id","created_at","previous_key_id","deleted"}
  --timeout D        give up after D (default 30s)

` + dbEnvUsage + `
Exit codes: 0 rotated, 1 failure, 2 usage error.
`

func runLinkkey(ctx context.Context, e env, args []string) error {
	rotate := len(args) > 0 && args[0] == "rotate"
	if rotate {
		args = args[1:]
	}
	fs := newFlags("linkkey")
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case !rotate:
		return usagef("want: pendingctl linkkey rotate")
	case len(rest) > 0:
		return usagef("unexpected argument %q", rest[0])
	}
	a, ctx, done, err := openAppWithin(ctx, e, *timeout)
	if err != nil {
		return err
	}
	defer done()
	r, err := app.RotateLinkKey(ctx, a.DB)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, r)
	}
	fmt.Fprintf(e.stdout, "download links are signed with key %s from %s", r.KeyID, r.CreatedAt.UTC().Format(time.RFC3339))
	if r.PreviousKeyID != "" {
		fmt.Fprintf(e.stdout, "; links of key %s open until they expire, DOWNLOAD_LINK_TTL plus a minute at most", r.PreviousKeyID)
	}
	if r.Deleted > 0 {
		fmt.Fprintf(e.stdout, "; %d older keys deleted", r.Deleted)
	}
	fmt.Fprintln(e.stdout)
	return nil
}
