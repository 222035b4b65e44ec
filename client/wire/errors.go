package wire

// Code is the stable, machine-readable name of an error answer: the
// "code" beside "error" in every error body of the API. The message is for
// people and may be reworded; a client branches on the code (and the
// status), never on the message. docs/API.md's table of codes says what a
// client does with each; openapi.yaml's ErrorCode schema lists them.
type Code string

// The codes of the API's error answers, one per meaning.
const (
	// Credentials (401, 403).
	CodeMissingToken       Code = "missing_token"        // 401: no bearer, no session cookie checked here
	CodeInvalidToken       Code = "invalid_token"        // 401: unknown, revoked, expired, or may not act on the workspace
	CodeOrgTokenUnanchored Code = "org_token_unanchored" // 401: an org token without an anchor workspace, refused here
	CodeForbiddenOrigin    Code = "forbidden_origin"     // 403: a session cookie on a request another site may have made
	CodeLinkInvalid        Code = "link_invalid"         // 403: a download link altered, cut, or not this file's
	CodeLinkExpired        Code = "link_expired"         // 403: a download link past its expires_at: ask for another

	// Routing (404, 405).
	CodeNotFound         Code = "not_found"          // 404: no route has this path
	CodeMethodNotAllowed Code = "method_not_allowed" // 405: the path's route takes another method (Allow names it)

	// The request's path and query (400).
	CodeBadWorkspaceID Code = "bad_workspace_id" // {workspaceId} is not a UUID
	CodeBadFileID      Code = "bad_file_id"      // {fileId} is not a UUID
	CodeBadUploadID    Code = "bad_upload_id"    // {uploadId}, or a commit's upload_id, is not a UUID
	CodeBadQuery       Code = "bad_query"        // a query string that does not parse
	CodeUnknownParam   Code = "unknown_param"    // a parameter the route does not define
	CodeBadLimit       Code = "bad_limit"        // list's limit outside 1..100, or repeated
	CodeBadCursor      Code = "bad_cursor"       // list's after is not a cursor of this service

	// The request's body (400, 413).
	CodeMalformedMultipart Code = "malformed_multipart" // not multipart/form-data, or a body that does not parse or ends early
	CodeMalformedJSON      Code = "malformed_json"      // not one JSON value of the expected shape
	CodeNoFiles            Code = "no_files"            // no files in the request
	CodeTooManyFiles       Code = "too_many_files"      // more than 64 files in one request
	CodeEmptyFile          Code = "empty_file"          // a file of 0 bytes ("filename")
	CodeBadSHA256          Code = "bad_sha256"          // a declared sha256 that is not 64 hex digits ("filename")
	CodeBadParts           Code = "bad_parts"           // declared part digests that do not fit the file ("filename")
	CodeDuplicateUploadID  Code = "duplicate_upload_id" // one upload_id twice in a commit ("upload_id")
	CodeFileTooLarge       Code = "file_too_large"      // 413: a file over the per-file cap ("filename", "size", "max")
	CodeRequestTooLarge    Code = "request_too_large"   // 413: a body over the request cap ("max")
	CodePresignDisabled    Code = "presign_disabled"    // 404 on presign, 400 on a commit: the server has no bucket
	CodeNotMultipart       Code = "not_multipart"       // resume of an upload of one PUT
	CodeMalformedRequest   Code = "malformed_request"   // an API Gateway event that is no request (a body that claims base64 and is not)

	// What the request names (404, 409, 416).
	CodeWorkspaceNotFound   Code = "workspace_not_found"   // 404: the workspace does not exist
	CodeFileNotFound        Code = "file_not_found"        // 404: absent, expired, acked (ack), or another workspace's
	CodeUploadNotFound      Code = "upload_not_found"      // 404: a presigned upload unknown, aborted or expired
	CodeUploadNotReceived   Code = "upload_not_received"   // 409: the bucket does not hold the upload's bytes as declared ("upload_id")
	CodeUploadCommitted     Code = "upload_committed"      // 409: a commit took the upload already ("upload_id")
	CodeQuotaExceeded       Code = "quota_exceeded"        // 409: the workspace's quota ("quota", "limit", "pending", "adding")
	CodeRangeNotSatisfiable Code = "range_not_satisfiable" // 416: a Range past the file's end

	// The service (500, 503) and API Gateway.
	CodeUnavailable Code = "unavailable" // 503: a dependency down or too slow; retry shortly
	CodeInternal    Code = "internal"    // 500: a bug; the text went to the log
	CodeGateway     Code = "gateway"     // API Gateway's own answer (throttling 429, an integration failure 502/504, …)
)

// ErrorBody is how every error answer begins: {"error": message, "code":
// code}, then the fields the code names ("filename", "max", "upload_id",
// …). The message is for people; clients branch on Code.
type ErrorBody struct {
	Error string `json:"error"`
	Code  Code   `json:"code"`
}
