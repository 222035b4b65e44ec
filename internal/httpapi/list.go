package httpapi

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// list is GET /workspaces/{workspaceId}/pending-uploads: the poll.
func (a *API) list(w http.ResponseWriter, r *http.Request, c call) error {
	ws, id := c.ws, c.id
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
	var cursor string
	if next != nil {
		cursor = next.Encode()
	}
	writeJSONBody(w, http.StatusOK, appendList(make([]byte, 0, 64+len(recs)*420), recs, cursor))
	return nil
}

// appendList appends the list's answer to b, exactly as encoding/json
// writes listBody (TestAppendListIsEncodingJSON holds it to that): the
// poll is the route every workspace calls every few seconds, and the
// reflection, the per-row strings and their allocations were most of the
// handler's own time.
func appendList(b []byte, recs []pendinguploads.Record, cursor string) []byte {
	b = append(b, `{"uploads":[`...)
	for i := range recs {
		r := &recs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"file_id":"`...)
		b = append(r.AppendFileID(b), `","uri":"`...)
		b = append(r.AppendURI(b), `","name":`...)
		b = appendJSONString(b, r.Filename)
		b = append(b, `,"mimeType":`...)
		b = appendJSONString(b, r.Mimetype)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, r.SizeBytes, 10)
		b = append(b, `,"sha256":`...)
		if len(r.SHA256) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(hex.AppendEncode(append(b, '"'), r.SHA256), '"')
		}
		b = appendTime(append(b, `,"created_at":`...), r.CreatedAt)
		b = appendTime(append(b, `,"expires_at":`...), r.ExpiresAt)
		b = append(b, `,"fetched_at":`...)
		if r.FetchedAt == nil {
			b = append(b, "null"...)
		} else {
			b = appendTime(b, *r.FetchedAt)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if cursor != "" {
		b = appendJSONString(append(b, `,"next_cursor":`...), cursor)
	}
	return append(b, '}')
}

// appendTime appends t in UTC as a JSON string, as time.Time's
// MarshalJSON writes it.
func appendTime(b []byte, t time.Time) []byte {
	return append(t.UTC().AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
}

// appendJSONString appends s as encoding/json writes a string: quoted,
// with '"', '\\', controls and the HTML characters <, >, & escaped. The
// names and types it meets are ASCII (sanitized); anything else goes
// through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
