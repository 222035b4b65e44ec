package wire

import "time"

// Link is the link route's success body: a download link to one file.
// URL is a reference relative to the link route's own URL (RFC 3986
// section 5; resolve it against the URL the link was asked at): it opens
// with a bare GET, no header and no cookie, until ExpiresAt, checked when
// each request starts.
type Link struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}
