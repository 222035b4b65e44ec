package wire

import "github.com/google/uuid"

// A file's malware scan state, as the scan route answers it (docs/API.md,
// GET /workspaces/{workspaceId}/chat/uploads/scan; docs/scanning.md on
// the server).
const (
	// ScanPending: the scan has not answered; the workspace does not see
	// the file yet.
	ScanPending = "pending"
	// ScanClean: delivered to the workspace (on a server that does not
	// scan, every file is).
	ScanClean = "clean"
	// ScanBlocked: the scan found a threat (Reason ReasonThreatsFound),
	// or an operator refused a held file (ReasonOperator); the file will
	// never be delivered.
	ScanBlocked = "blocked"
	// ScanHeld: the scan could not decide, or did not answer in time, and
	// the server holds the file for an operator; not delivered.
	ScanHeld = "held"
	// ScanNotFound: no such file of this workspace (never, expired, or
	// swept).
	ScanNotFound = "not_found"
)

// Why a file is blocked or held, or was delivered without a clean scan
// (the server's policy): the scanner's result, lower-cased; or
// ReasonOperator, an operator's decision on a held file.
const (
	ReasonThreatsFound = "threats_found"
	ReasonUnsupported  = "unsupported"
	ReasonAccessDenied = "access_denied"
	ReasonFailed       = "failed"
	ReasonTimeout      = "timeout"
	ReasonOperator     = "operator"
)

// ScanAnswer is the scan route's success body: each file asked for, in
// the order asked.
type ScanAnswer struct {
	Files []FileScan `json:"files"`
}

// FileScan is one file's scan state; Reason is absent for a clean scan
// and while pending. The threat's name is never told: it stays in the
// operator's record.
type FileScan struct {
	FileID uuid.UUID `json:"file_id"`
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
}
