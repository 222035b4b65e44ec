package metrics

// Namespace is the CloudWatch namespace of the service's metrics.
const Namespace = "PendingUploads"

// Metric names the service emits.
const (
	// Swept counts rows deleted by a sweep, with the dimension Outcome.
	Swept = "pending_uploads_swept"
	// Staged counts files committed by the upload route.
	Staged = "pending_uploads_staged"
	// StagedBytes sums the sizes of those files, in Bytes.
	StagedBytes = "pending_uploads_staged_bytes"
	// Fetched counts content fetches answered 200 or 307.
	Fetched = "pending_uploads_fetched"
	// Acked counts files acked for the first time; a repeated ack (or
	// one that raced a sweep) answers 200 but is not counted.
	Acked = "pending_uploads_acked"
	// QuotaRefused counts uploads, presigns and commits refused for the
	// workspace's quota (409 workspace quota exceeded).
	QuotaRefused = "pending_uploads_quota_refused"
	// WorkspaceMaxPendingBytes and WorkspaceMaxPendingFiles are what the
	// fullest workspace has waiting (by bytes, and by files), measured by
	// each sweep: how near the quota the nearest workspace is.
	WorkspaceMaxPendingBytes = "pending_uploads_workspace_max_pending_bytes"
	WorkspaceMaxPendingFiles = "pending_uploads_workspace_max_pending_files"
	// BacklogFiles is the number of files waiting (neither acked nor
	// expired), measured by each sweep.
	BacklogFiles = "pending_uploads_backlog_files"
	// BacklogBytes is their total size, in Bytes.
	BacklogBytes = "pending_uploads_backlog_bytes"
	// BacklogOldestAge is the age of the oldest waiting file, in Seconds
	// (0 when none waits).
	BacklogOldestAge = "pending_uploads_backlog_oldest_age_seconds"
	// ScanClean counts files a malware scan's result delivered (the
	// scanresult function; docs/scanning.md).
	ScanClean = "pending_uploads_scan_clean"
	// ScanBlocked counts files a scan found infected: never delivered,
	// their bytes deleted. Its alarm fires on any.
	ScanBlocked = "pending_uploads_scan_blocked"
	// ScanHeld counts files held for an operator: a scan that could not
	// decide, or never answered within SCAN_TIMEOUT, under the hold policy.
	// Its alarm fires on any.
	ScanHeld = "pending_uploads_scan_held"
)

// Outcome is the dimension of Swept that says why rows went.
const Outcome = "outcome"

// Values of the dimension Outcome.
const (
	OutcomeAcked   = "acked"   // acked rows past their retention
	OutcomeExpired = "expired" // unacked rows past expires_at
	OutcomeError   = "error"   // a failed sweep run
)
