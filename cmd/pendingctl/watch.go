package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/client/watch"
)

// checkWatchFlags refuses --watch beside --once or --interval, and a
// fallback interval too short to be a fallback.
func checkWatchFlags(on, once bool, interval, fallback time.Duration) error {
	switch {
	case !on:
		return nil
	case once || interval != 0:
		return usagef("--watch excludes --once and --interval")
	case fallback < time.Second:
		return usagef("--fallback-interval must be at least 1s")
	}
	return nil
}

// runWatch is pull --watch: it subscribes where the server's limits say
// (client.PushSubscription, the same API URL and token as a pull), runs
// round on each hint, each reconnection and after fallback without one,
// and says on stderr, one line each, when it connects, polls or waits to
// reconnect. A refused token or a folder another pull holds stops it; a
// signal stops it cleanly, saying what it left when it cut a delivery
// short (round says so).
func runWatch(ctx context.Context, e env, c *client.Client, ws uuid.UUID, round func() (inbox.Result, bool, error), fallback time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	sub, err := c.PushSubscription(sctx, ws)
	cancel()
	if errors.Is(err, client.ErrNoPush) {
		return fmt.Errorf("%s publishes no upload hints (its GET /uploads/limits has no push): use --interval instead", c.BaseURL())
	}
	if err != nil {
		return err
	}
	var cutShort bool // a signal cut a delivery short
	w := &watch.Watcher{
		Sub:      sub,
		Fallback: fallback,
		Status:   func(line string) { fmt.Fprintln(e.stderr, "pendingctl pull: "+line) },
		Pull: func(ctx context.Context) error {
			res, cut, err := round()
			if cut && (res.Listed > 0 || len(res.Delivered) > 0) {
				cutShort = true
			}
			if err != nil && ctx.Err() == nil {
				if client.IsUnauthorized(err) || errors.Is(err, inbox.ErrLocked) {
					return err
				}
				fmt.Fprintf(e.stderr, "pendingctl pull: %s (will retry)\n", explain(err))
			}
			return nil
		},
	}
	err = w.Run(ctx)
	if cutShort && err == nil {
		return stopped(e)
	}
	return err
}

// usePollURL makes p list through url (or $PENDINGUPLOADS_POLL_URL): the
// list function's URL, with the same token as the API. Nothing when both
// are empty.
func usePollURL(p *inbox.Puller, af apiFlags, e env, url string) error {
	if url == "" {
		url = e.getenv("PENDINGUPLOADS_POLL_URL")
	}
	if url == "" {
		return nil
	}
	af.api = url
	lc, _, err := af.client(e)
	if err != nil {
		return fmt.Errorf("--poll-url: %w", err)
	}
	p.Lister = lc
	return nil
}
