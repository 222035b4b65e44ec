package httpapi

// Route is one entry of the HTTP contract: the method, the path pattern
// (net/http ServeMux syntax, which is also API Gateway's {param} syntax) and
// the name of the Lambda function (its directory under functions/) that
// serves it.
type Route struct {
	Method   string
	Path     string
	Function string
}

// Routes is the whole HTTP API, in the order of API.md. The dev server
// mounts every entry; each Lambda serves its function's entries (one, but
// list also serves the public GET /uploads/limits), each with its CORS
// preflight OPTIONS; tests hold template.yaml and openapi.yaml to this
// table.
var Routes = []Route{
	{"POST", "/workspaces/{workspaceId}/chat/uploads", "upload"},
	{"POST", "/workspaces/{workspaceId}/chat/uploads/presign", "presign"},
	{"GET", "/workspaces/{workspaceId}/pending-uploads", "list"},
	{"GET", "/workspaces/{workspaceId}/pending-uploads/{fileId}/content", "content"},
	{"POST", "/workspaces/{workspaceId}/pending-uploads/{fileId}/ack", "ack"},
	{"GET", LimitsPath, "list"},
}

// LimitsPath is the public route of the service's limits (limits.go),
// served by the list function.
const LimitsPath = "/uploads/limits"
