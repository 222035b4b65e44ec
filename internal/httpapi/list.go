package httpapi

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// listedFile is one file of the list. Times are RFC 3339 in UTC, as
// time.Time encodes them, formatted here: encoding/json's call of each
// time's MarshalJSON was a tenth of the handler's work.
type listedFile struct {
	FileID    string  `json:"file_id"`
	URI       string  `json:"uri"`
	Name      string  `json:"name"`
	MimeType  string  `json:"mimeType"`
	Size      int64   `json:"size"`
	SHA256    *string `json:"sha256"` // null: staged without a digest (by the platform's own server)
	CreatedAt string  `json:"created_at"`
	ExpiresAt string  `json:"expires_at"`
	FetchedAt *string `json:"fetched_at"`
}

type listBody struct {
	Uploads    []listedFile `json:"uploads"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// list is GET /workspaces/{workspaceId}/pending-uploads: the poll.
func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	ws, id, err := a.guard(r)
	if err != nil {
		return err
	}
	// The query parsed, and names only limit and after (serve checked);
	// a repeated parameter (which one would count?) is answered below with
	// that parameter's message.
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	limit := pendinguploads.DefaultListLimit
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || len(v) > 1 || n < 1 || n > pendinguploads.MaxListLimit {
			return errBadLimit
		}
		limit = n
	}
	var after *pendinguploads.Cursor
	if v, ok := q["after"]; ok {
		c, err := pendinguploads.DecodeCursor(v[0])
		if err != nil || len(v) > 1 {
			return errBadCursor
		}
		after = &c
	}
	recs, next, err := a.store.List(r.Context(), id, ws, limit, after)
	if errors.Is(err, pendinguploads.ErrBadCursor) {
		return errBadCursor
	}
	if err != nil {
		return err
	}
	body := listBody{Uploads: make([]listedFile, len(recs))}
	for i, rec := range recs {
		body.Uploads[i] = listedFile{
			FileID: rec.FileID.String(), URI: rec.URI(), Name: rec.Filename, MimeType: rec.Mimetype,
			Size: rec.SizeBytes, SHA256: hexOrNil(rec.SHA256),
			CreatedAt: rfc3339(rec.CreatedAt), ExpiresAt: rfc3339(rec.ExpiresAt), FetchedAt: rfc3339OrNil(rec.FetchedAt),
		}
	}
	if next != nil {
		body.NextCursor = next.Encode()
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// rfc3339 is t in UTC as time.Time's MarshalJSON writes it.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func rfc3339OrNil(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := rfc3339(*t)
	return &s
}

// hexOrNil is sum in hex, or nil for a row with no digest: nothing claims
// a digest it did not compute.
func hexOrNil(sum []byte) *string {
	if len(sum) == 0 {
		return nil
	}
	h := hex.EncodeToString(sum)
	return &h
}
