package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"path"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// errNoLinkKey is a link or download route served without a key: the
// content function never starts without one (config.NeedLinkKey).
var errNoLinkKey = errors.New("download links without a key (DOWNLOAD_LINK_KEY)")

// link is POST /workspaces/{workspaceId}/pending-uploads/{fileId}/link: a
// download link to the file, for exactly the callers the content route
// serves. The file is looked up as content looks it up, wanting no byte
// (so its fetched_at stays: opening the link stamps it), with the same
// refusals: another workspace's caller gets the content route's 401, and
// another workspace's file its 404. The link's URL is relative to this
// route's own (the file's download path, next to link), so that it holds
// behind a stage, a custom domain's base path or the platform's edge
// alike.
func (a *API) link(w http.ResponseWriter, r *http.Request, c call) error {
	file, err := pathFileID(r)
	if err != nil {
		return err
	}
	if a.Links == nil {
		return errNoLinkKey
	}
	_, err = a.store.Fetch(r.Context(), c.id, c.ws, file, pendinguploads.Want{From: math.MaxInt64})
	if errors.Is(err, pendinguploads.ErrNotFound) {
		return errExpired
	}
	if err != nil {
		return err
	}
	l, err := a.Links.Sign(r.Context(), c.ws, file)
	if err != nil {
		return err
	}
	a.logger().Info("linked", append([]any{"workspace_id", c.ws, "file_id", file, "expires_at", l.Expires}, c.logAttrs()...)...)
	writeJSON(w, http.StatusOK, wire.Link{URL: path.Base(DownloadRoute.Path) + "?" + l.Query, ExpiresAt: l.Expires})
	return nil
}

// download is GET /workspaces/{workspaceId}/pending-uploads/{fileId}/download,
// a download link opened: no credential, the link's expires and signature
// are the capability to read this one file (downloadlink), checked when
// the request starts; a download under way outlives the link's expiry.
// The file is then answered as the content route answers it (sendFile:
// headers, Range, the stamp of fetched_at, the fetched log line and
// metric), acked or not until the sweep, never redirected. Every answer
// of the route, errors too, carries Referrer-Policy: no-referrer: the
// route's Header, which front sets before anything answers.
func (a *API) download(w http.ResponseWriter, r *http.Request, c call) error {
	if a.Links == nil {
		return errNoLinkKey
	}
	ws, werr := uuid.Parse(r.PathValue("workspaceId"))
	file, ferr := uuid.Parse(r.PathValue("fileId"))
	q, err := parseQuery(r.URL.RawQuery) // checkQuery parsed it already
	if werr != nil || ferr != nil || err != nil || len(q[downloadlink.ParamExpires]) != 1 || len(q[downloadlink.ParamSignature]) != 1 ||
		len(q[downloadlink.ParamKey]) > 1 {
		return downloadlink.ErrInvalid
	}
	link, err := a.Links.Check(r.Context(), ws, file, q.Get(downloadlink.ParamExpires), q.Get(downloadlink.ParamKey), q.Get(downloadlink.ParamSignature))
	if err != nil {
		return err
	}
	return a.sendFile(w, r, c, "link", false, func(ctx context.Context, want pendinguploads.Want) (pendinguploads.Fetched, error) {
		return a.store.FetchLinked(ctx, link, want)
	})
}
