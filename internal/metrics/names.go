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
	// UnanchoredOrgToken counts the uses of org tokens without an anchor
	// workspace (org_api_tokens.org_id NULL), with the dimension Outcome:
	// OutcomeRefused by default, OutcomeAccepted where
	// ACCEPT_UNANCHORED_ORG_TOKENS keeps the platform's legacy rule.
	UnanchoredOrgToken = "pending_uploads_unanchored_org_token"
	// WorkspaceMaxPendingBytes and WorkspaceMaxPendingFiles are what the
	// fullest workspace has waiting (by bytes, and by files), measured by
	// each sweep: how near the quota the nearest workspace is.
	WorkspaceMaxPendingBytes = "pending_uploads_workspace_max_pending_bytes"
	WorkspaceMaxPendingFiles = "pending_uploads_workspace_max_pending_files"
	// SweepUnfinished is 1 for a sweep that stopped before it had
	// deleted every eligible row (its deadline near, or its batches
	// spent), 0 for one that finished: the next run resumes where it
	// stopped.
	SweepUnfinished = "pending_uploads_sweep_unfinished"
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
	// Its alarm fires on any. (The scan's alarms on these two are
	// Monitoring=full's, which emits every metric.)
	ScanHeld = "pending_uploads_scan_held"
)

// Names are every metric name above: the values METRICS may list.
var Names = []string{
	Swept, Staged, StagedBytes, Fetched, Acked, QuotaRefused,
	WorkspaceMaxPendingBytes, WorkspaceMaxPendingFiles, BacklogFiles, BacklogBytes, BacklogOldestAge,
	UnanchoredOrgToken, SweepUnfinished, ScanClean, ScanBlocked, ScanHeld,
}

// Outcome is the dimension of Swept that says why rows went, and of
// UnanchoredOrgToken that says whether the token was accepted.
const Outcome = "outcome"

// Values of the dimension Outcome.
const (
	OutcomeAcked   = "acked"   // acked rows past their retention
	OutcomeExpired = "expired" // unacked rows past expires_at
	OutcomeError   = "error"   // a failed sweep run

	OutcomeAccepted = "accepted" // an unanchored org token, accepted (legacy)
	OutcomeRefused  = "refused"  // an unanchored org token, refused
)
