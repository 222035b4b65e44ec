package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
)

// File is one pending upload as the list shows it.
type File struct {
	FileID   uuid.UUID `json:"file_id"`
	URI      string    `json:"uri"`
	Name     string    `json:"name"`
	MimeType string    `json:"mimeType"`
	Size     int64     `json:"size"`
	// SHA256 is the hex SHA-256 of the bytes; "" only for rows staged
	// before the server kept one.
	SHA256    string     `json:"sha256"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	FetchedAt *time.Time `json:"fetched_at"`
}

// Page is one page of the list.
type Page struct {
	Uploads []File `json:"uploads"`
	// NextCursor is "" on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// MaxListLimit is the largest page the API serves.
const MaxListLimit = 100

// maxPages bounds List, against a server that never ends a listing.
const maxPages = 100000

// ListPage returns one page of workspace ws's pending uploads, oldest
// first: limit 1..MaxListLimit (0: the server's default, 50), after "" or
// a previous page's NextCursor. It is retried per Retry.
func (c *Client) ListPage(ctx context.Context, ws uuid.UUID, limit int, after string) (Page, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
	resp, err := c.send(ctx, request{
		method: "GET", url: c.endpoint(q, "workspaces", ws.String(), "pending-uploads"),
		auth: true, retry: true, op: "list",
	})
	if err != nil {
		return Page{}, err
	}
	var p Page
	if err := decodeJSON(resp, "list", &p); err != nil {
		return Page{}, err
	}
	if p.Uploads == nil {
		p.Uploads = []File{}
	}
	return p, nil
}

// List returns every pending upload of ws, following the cursor to the
// last page. A cursor that repeats is an error, not a loop.
func (c *Client) List(ctx context.Context, ws uuid.UUID) ([]File, error) {
	all := []File{}
	seen := map[string]bool{}
	after := ""
	for range maxPages {
		p, err := c.ListPage(ctx, ws, MaxListLimit, after)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Uploads...)
		if p.NextCursor == "" {
			return all, nil
		}
		if seen[p.NextCursor] {
			return nil, fmt.Errorf("list: the server repeated a cursor")
		}
		seen[p.NextCursor] = true
		after = p.NextCursor
	}
	return nil, errors.New("list: too many pages")
}

// AckResult is the answer of Ack (wire's): Raced says the row vanished
// between look-up and ack (a sweep); the ack still holds.
type AckResult = wire.AckAnswer

// Ack tells the server that ws is done with fileID. It is idempotent (a
// re-ack succeeds), so it is retried per Retry. A 404 (absent, expired, or
// another workspace's) comes back as an *APIError: see IsNotFound.
func (c *Client) Ack(ctx context.Context, ws, fileID uuid.UUID) (AckResult, error) {
	resp, err := c.send(ctx, request{
		method: "POST", url: c.endpoint(nil, "workspaces", ws.String(), "pending-uploads", fileID.String(), "ack"),
		auth: true, retry: true, op: "ack " + fileID.String(),
	})
	if err != nil {
		return AckResult{}, err
	}
	var r AckResult
	if err := decodeJSON(resp, "ack", &r); err != nil {
		return AckResult{}, err
	}
	if !r.Acked {
		return r, fmt.Errorf("ack %s: the server answered acked=false", fileID)
	}
	return r, nil
}
