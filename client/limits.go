package client

import (
	"context"
	"sync"

	"github.com/pendinguploads/pendinguploads/client/wire"
)

// Limits are the caps a server announces at GET /uploads/limits
// (wire.Limits), each null of the answer read as 0.
type Limits struct {
	PerFileBytes             int64
	PerRequestBytes          int64
	MaxAttachmentsPerMessage int
	Presign                  bool
	// MultipartThresholdBytes and MultipartPartBytes: a presigned file
	// above the threshold may go to the bucket in parts of
	// MultipartPartBytes (the last one shorter). Both are 0 where the
	// server takes no parts (no bucket, or a server older than uploads
	// in parts).
	MultipartThresholdBytes int64
	MultipartPartBytes      int64
	// WorkspaceMaxPendingBytes and WorkspaceMaxPendingFiles are the
	// workspace quota on what waits; 0 where there is none (or a server
	// older than the quota).
	WorkspaceMaxPendingBytes int64
	WorkspaceMaxPendingFiles int64
	// Push is where the server publishes upload hints (nil: it has none;
	// see PushSubscription).
	Push *Push
}

// Limits asks the server for its caps (GET /uploads/limits, public: no
// token is sent). It is retried per Retry. A server older than the route
// answers 404 (IsNotFound).
func (c *Client) Limits(ctx context.Context) (Limits, error) {
	resp, err := c.send(ctx, request{method: "GET", url: c.endpoint(nil, "uploads", "limits"), retry: true, op: "limits"})
	if err != nil {
		return Limits{}, err
	}
	var l wire.Limits
	if err := decodeJSON(resp, "limits", &l); err != nil {
		return Limits{}, err
	}
	return Limits{
		PerFileBytes: l.PerFileBytes, PerRequestBytes: l.PerRequestBytes,
		MaxAttachmentsPerMessage: l.MaxAttachmentsPerMessage, Presign: l.Presign,
		MultipartThresholdBytes: orZero(l.MultipartThresholdBytes), MultipartPartBytes: orZero(l.MultipartPartBytes),
		WorkspaceMaxPendingBytes: orZero(l.WorkspaceMaxPendingBytes), WorkspaceMaxPendingFiles: orZero(l.WorkspaceMaxPendingFiles),
		Push: l.Push,
	}, nil
}

// orZero is *n, or 0 for null.
func orZero(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

// serverLimits is the server's Limits, asked once per Client. A server
// without the route (404) is remembered as one with no limits to tell (a
// zero Limits); any other failure returns false and is not remembered
// (the upload then meets the same failure, or the server's own refusal).
func (c *Client) serverLimits(ctx context.Context) (Limits, bool) {
	c.limitsMu.Lock()
	defer c.limitsMu.Unlock()
	if c.limitsKnown {
		return c.limits, true
	}
	l, err := c.Limits(ctx)
	switch {
	case err == nil:
		c.limits = l
	case IsNotFound(err):
		c.limits = Limits{}
	default:
		return Limits{}, false
	}
	c.limitsKnown = true
	return c.limits, true
}

// fileCap is the per-file cap Upload holds files to: the server's
// per_file_bytes, or the default cap, MaxFileBytes, from a server without
// the route, with an unusable answer, or that could not be asked.
func (c *Client) fileCap(ctx context.Context) int64 {
	if l, ok := c.serverLimits(ctx); ok && l.PerFileBytes > 0 {
		return l.PerFileBytes
	}
	return MaxFileBytes
}

// partBytes is the size of the parts a file of size bytes goes to the
// bucket in, or 0 when it goes in one PUT: at or under the server's
// threshold, or a server that takes no parts or could not be asked.
func (c *Client) partBytes(ctx context.Context, size int64) int64 {
	l, ok := c.serverLimits(ctx)
	if !ok || l.MultipartThresholdBytes <= 0 || l.MultipartPartBytes <= 0 || size <= l.MultipartThresholdBytes {
		return 0
	}
	return l.MultipartPartBytes
}

// limitsState is what serverLimits remembers.
type limitsState struct {
	limitsMu    sync.Mutex
	limitsKnown bool
	limits      Limits
}
