package client

import (
	"context"
	"sync"
)

// Limits are the caps a server announces at GET /uploads/limits.
type Limits struct {
	PerFileBytes             int64 `json:"per_file_bytes"`
	PerRequestBytes          int64 `json:"per_request_bytes"`
	MaxAttachmentsPerMessage int   `json:"max_attachments_per_message"`
	Presign                  bool  `json:"presign"`
}

// Limits asks the server for its caps (GET /uploads/limits, public: no
// token is sent). It is retried per Retry. A server older than the route
// answers 404 (IsNotFound).
func (c *Client) Limits(ctx context.Context) (Limits, error) {
	resp, err := c.send(ctx, request{method: "GET", url: c.endpoint(nil, "uploads", "limits"), retry: true, op: "limits"})
	if err != nil {
		return Limits{}, err
	}
	var l Limits
	if err := decodeJSON(resp, "limits", &l); err != nil {
		return Limits{}, err
	}
	return l, nil
}

// fileCap is the per-file cap Upload holds files to: the server's
// per_file_bytes, asked once per Client. A server without the route (404)
// or with an unusable answer has the default cap, MaxFileBytes, as before
// the route existed; any other failure also gives MaxFileBytes, but is
// not remembered (the upload then meets the same failure, or the server's
// own 413).
func (c *Client) fileCap(ctx context.Context) int64 {
	c.limitsMu.Lock()
	defer c.limitsMu.Unlock()
	if c.fileCapKnown > 0 {
		return c.fileCapKnown
	}
	l, err := c.Limits(ctx)
	switch {
	case err == nil && l.PerFileBytes > 0:
		c.fileCapKnown = l.PerFileBytes
	case err == nil || IsNotFound(err):
		c.fileCapKnown = MaxFileBytes
	default:
		return MaxFileBytes
	}
	return c.fileCapKnown
}

// limitsState is what fileCap remembers.
type limitsState struct {
	limitsMu     sync.Mutex
	fileCapKnown int64
}
