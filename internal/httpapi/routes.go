package httpapi

import (
	"net/http"

	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
)

// Route is one entry of the HTTP contract: the method, the path pattern
// (net/http ServeMux syntax, which is also API Gateway's {param} syntax),
// the Lambda function that serves it (its directory under functions/),
// and its handler, which serve hands the request's call (who it acts as,
// the workspace its path names; zero for a public route).
type Route struct {
	Method   string
	Path     string
	Function string
	handle   func(*API, http.ResponseWriter, *http.Request, call) error
	// Public routes take no credentials.
	Public bool
	// Query names the query parameters the route defines; any other, or a
	// query that does not parse, is 400 before anything happens (serve).
	Query []string
	// Header is set on every answer to a request on the route's path,
	// whatever its method (a 405, a preflight) and whatever answers it (a
	// refusal of its query, its handler), before anything can answer
	// (front): a header no answer of the route may lack.
	Header http.Header
}

// The routes of API.md. Each Lambda function serves its own (Handler);
// the dev server serves them all (Mux).
var (
	UploadRoute  = Route{"POST", "/workspaces/{workspaceId}/chat/uploads", "upload", (*API).upload, false, nil, nil}
	PresignRoute = Route{"POST", "/workspaces/{workspaceId}/chat/uploads/presign", "presign", (*API).presign, false, nil, nil}
	ResumeRoute  = Route{"POST", "/workspaces/{workspaceId}/chat/uploads/presign/{uploadId}", "presign", (*API).resume, false, nil, nil}
	AbortRoute   = Route{"DELETE", "/workspaces/{workspaceId}/chat/uploads/presign/{uploadId}", "presign", (*API).abort, false, nil, nil}
	ListRoute    = Route{"GET", "/workspaces/{workspaceId}/pending-uploads", "list", (*API).list, false, []string{"limit", "after"}, nil}
	ContentRoute = Route{"GET", "/workspaces/{workspaceId}/pending-uploads/{fileId}/content", "content", (*API).content, false, []string{"redirect"}, nil}
	// LinkRoute mints a download link to one file, for a caller the
	// content route serves; DownloadRoute opens one: public (no
	// credential), the link's query is its capability, and every answer
	// carries Referrer-Policy: no-referrer.
	LinkRoute     = Route{"POST", "/workspaces/{workspaceId}/pending-uploads/{fileId}/link", "content", (*API).link, false, nil, nil}
	DownloadRoute = Route{"GET", "/workspaces/{workspaceId}/pending-uploads/{fileId}/download", "content", (*API).download, true,
		[]string{downloadlink.ParamExpires, downloadlink.ParamKey, downloadlink.ParamSignature},
		// A link's signature is in its URL: no page the file opens, and
		// no answer of the route, may send it on as a Referer.
		http.Header{"Referrer-Policy": {"no-referrer"}}}
	AckRoute = Route{"POST", "/workspaces/{workspaceId}/pending-uploads/{fileId}/ack", "ack", (*API).ack, false, nil, nil}
	// ScanRoute tells the sender each file's malware scan state: served
	// by the upload function, to whom it serves.
	ScanRoute = Route{"GET", "/workspaces/{workspaceId}/chat/uploads/scan", "upload", (*API).scan, false, []string{"file_id"}, nil}
	// LimitsRoute is public (no token), served by the list function.
	LimitsRoute = Route{"GET", "/uploads/limits", "list", (*API).limits, true, nil, nil}
)

// Routes is the whole HTTP API, in the order of API.md: the one table the
// functions, the dev server, and the tests of openapi.yaml and
// template.yaml read.
var Routes = []Route{UploadRoute, PresignRoute, ResumeRoute, AbortRoute, ScanRoute, ListRoute, ContentRoute, LinkRoute, DownloadRoute, AckRoute, LimitsRoute}

// RoutesOf returns the routes of Routes that function (a directory under
// functions/) serves, in the table's order: what its main hands to
// Handler, and what the tests that build a function's handler take, so
// that the table is the one place that says which function serves what.
// A function with no HTTP route gets none.
func RoutesOf(function string) []Route {
	var routes []Route
	for _, rt := range Routes {
		if rt.Function == function {
			routes = append(routes, rt)
		}
	}
	return routes
}
