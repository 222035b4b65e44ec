package client

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
)

// Link is a download link to one file: URL opens with a bare GET, no
// header and no cookie (a browser, a tool without a token), until
// ExpiresAt, checked when each request starts.
type Link struct {
	URL       string
	ExpiresAt time.Time
}

// Link asks the service for a download link to fileID of ws (POST
// …/{fileId}/link, as the client's token), retried per Retry like any
// request that changes nothing. The service answers the URL relative to
// the link route's own; Link returns it absolute, resolved against that
// route's URL (API.md). Errors are *APIError as for Fetch: a file
// absent, expired or swept, another workspace's, a token refused.
func (c *Client) Link(ctx context.Context, ws, fileID uuid.UUID) (Link, error) {
	op := "link " + fileID.String()
	route := c.endpoint(nil, "workspaces", ws.String(), "pending-uploads", fileID.String(), "link")
	resp, err := c.send(ctx, request{method: "POST", url: route, auth: true, retry: true, op: op})
	if err != nil {
		return Link{}, err
	}
	var l wire.Link
	if err := decodeJSON(resp, op, &l); err != nil {
		return Link{}, err
	}
	base, err := url.Parse(route)
	if err != nil {
		return Link{}, fmt.Errorf("%s: %w", op, err)
	}
	ref, err := url.Parse(l.URL)
	if err != nil || l.URL == "" {
		return Link{}, fmt.Errorf("%s: the answer's url %q is not a URL", op, l.URL)
	}
	return Link{URL: base.ResolveReference(ref).String(), ExpiresAt: l.ExpiresAt}, nil
}
