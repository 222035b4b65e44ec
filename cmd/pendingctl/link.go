package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

const linkUsage = `Usage: pendingctl link --workspace W [flags] FILE_ID

Print a download link to file FILE_ID of workspace W: a URL that opens
with a plain GET, no token and no cookie (a browser, curl, a tool that
has no token), until it expires (the server's DOWNLOAD_LINK_TTL, 5
minutes by default). Anyone who holds the link can read the file until
then: share it as you would the file.

Flags:
  --workspace W      the workspace's UUID (default: $PENDINGUPLOADS_WORKSPACE)
` + apiFlagsUsage + `
Output: the link, one line (on stdout), and when it expires (on stderr);
with --json, {"url","expires_at"}.

Exit codes: 0 a link printed, 1 failure (the file is gone, the token is
refused), 2 usage error.

Example:
  curl --fail-with-body -OJ "$(pendingctl link 9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a)"

The file lands under its own name. --fail-with-body (curl 7.76 or
later), not -f, which throws the answer away: a link refused (expired,
or altered) exits 22 with the answer, which says what to do, in
./download.
`

func runLink(ctx context.Context, e env, args []string) error {
	fs := newFlags("link")
	var af apiFlags
	af.register(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("want one FILE_ID, got %d arguments", len(rest))
	}
	file, err := uuid.Parse(rest[0])
	if err != nil {
		return usagef("FILE_ID %q is not a UUID", rest[0])
	}
	c, ws, err := af.client(e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, af.timeout)
	defer cancel()
	l, err := c.Link(ctx, ws, file)
	if err != nil {
		return err
	}
	if af.json {
		return writeJSON(e.stdout, map[string]any{"url": l.URL, "expires_at": l.ExpiresAt})
	}
	fmt.Fprintln(e.stdout, l.URL)
	fmt.Fprintf(e.stderr, "expires %s (in %s)\n", l.ExpiresAt.Local().Format("2006-01-02 15:04:05"), time.Until(l.ExpiresAt).Round(time.Second))
	return nil
}
