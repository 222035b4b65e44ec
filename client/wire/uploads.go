package wire

import (
	"time"

	"github.com/google/uuid"
)

// StagedFile is one file the upload route staged: its success answer
// lists them in request order (StagedAnswer), both forms alike.
type StagedFile struct {
	FileID   uuid.UUID `json:"file_id"`
	URI      string    `json:"uri"`
	Name     string    `json:"name"`
	MimeType string    `json:"mimeType"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"`
}

// StagedAnswer is the upload route's success body.
type StagedAnswer struct {
	Files []StagedFile `json:"files"`
}

// PresignRequest is the presign route's body: 1 to 64 files.
type PresignRequest struct {
	Files []PresignFile `json:"files"`
}

// PresignFile is one file a client means to PUT into the bucket.
type PresignFile struct {
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
	// SHA256 is optional: hex; the PUT is then bound to exactly these
	// bytes.
	SHA256 string `json:"sha256,omitempty"`
	// Multipart says the client can send the file in parts.
	Multipart bool `json:"multipart,omitempty"`
	// Parts, optional: each part's SHA-256, in order.
	Parts []PartSum `json:"parts,omitempty"`
}

// PartSum is the declared SHA-256 (hex) of one part.
type PartSum struct {
	SHA256 string `json:"sha256"`
}

// PresignAnswer is the presign route's success body: one upload per
// file, in order.
type PresignAnswer struct {
	Uploads []PresignedUpload `json:"uploads"`
}

// PresignedUpload is one file of the presign answer (and the resume
// answer): for one PUT, send the file's bytes with Method to URL with
// exactly Headers, and no Authorization; for a file in parts (Multipart
// set, Method, URL and Headers absent), each part's bytes to its own URL.
type PresignedUpload struct {
	UploadID  uuid.UUID         `json:"upload_id"`
	Method    string            `json:"method,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	ExpiresAt time.Time         `json:"expires_at"`
	// Multipart is the plan of a file that goes in parts; nil for one PUT.
	Multipart *PartPlan `json:"multipart,omitempty"`
}

// PartPlan is how a file in parts goes to the bucket: PartCount parts of
// PartBytes (the last one shorter), the parts the bucket holds already
// (Received, the bucket's word), and a presigned PUT of each other part.
// Received and Parts are [] when empty, never null.
type PartPlan struct {
	PartBytes int64           `json:"part_bytes"`
	PartCount int             `json:"part_count"`
	Received  []ReceivedPart  `json:"received"`
	Parts     []PresignedPart `json:"parts"`
}

// ReceivedPart is a part the bucket holds.
type ReceivedPart struct {
	PartNumber int   `json:"part_number"`
	Size       int64 `json:"size"`
}

// PresignedPart is the presigned PUT of one part: send its Size bytes,
// starting at (PartNumber-1) × PartBytes, with Method to URL with exactly
// Headers.
type PresignedPart struct {
	PartNumber int               `json:"part_number"`
	Size       int64             `json:"size"`
	Method     string            `json:"method"`
	URL        string            `json:"url"`
	Headers    map[string]string `json:"headers"`
}

// CommitRequest is the upload route's JSON body (form B): the presigned
// uploads to stage, all or nothing.
type CommitRequest struct {
	Files []CommitFile `json:"files"`
}

// CommitFile names one presigned upload. UploadID is a string, not a
// uuid.UUID, so that the server answers one that does not parse with
// bad_upload_id rather than malformed_json.
type CommitFile struct {
	UploadID string `json:"upload_id"`
}

// AbortAnswer is the abort route's success body.
type AbortAnswer struct {
	Aborted bool `json:"aborted"`
}

// AckAnswer is the ack route's success body.
type AckAnswer struct {
	Acked bool `json:"acked"`
	// Raced: the row vanished between look-up and ack (a sweep); the ack
	// still holds.
	Raced bool `json:"raced,omitempty"`
}

// Limits is the answer of GET /uploads/limits: what a client needs before
// it uploads, from the same settings the server enforces.
type Limits struct {
	PerFileBytes             int64 `json:"per_file_bytes"`
	PerRequestBytes          int64 `json:"per_request_bytes"`
	MaxAttachmentsPerMessage int   `json:"max_attachments_per_message"`
	Presign                  bool  `json:"presign"`
	// Multipart: a presigned file above the threshold goes in parts of
	// part_bytes, for a client that asks (null: no bucket).
	MultipartThresholdBytes *int64 `json:"multipart_threshold_bytes"`
	MultipartPartBytes      *int64 `json:"multipart_part_bytes"`
	// The workspace quota on what waits (null: none).
	WorkspaceMaxPendingBytes *int64 `json:"workspace_max_pending_bytes"`
	WorkspaceMaxPendingFiles *int64 `json:"workspace_max_pending_files"`
	// Push: where to subscribe for upload hints (null: none).
	Push *Push `json:"push"`
}

// Push is where a client subscribes to hear of new files at once (MQTT
// over WebSockets; username the workspace id, password its token), so
// that a watching pull needs nothing beyond what a pull needs.
type Push struct {
	// URL is the broker's MQTT-over-WebSocket URL (wss:// in AWS, with
	// the authorizer's name in its query as IoT Core reads it).
	URL string `json:"url"`
	// TopicTemplate is the workspace's topic, {workspace_id} for its id.
	TopicTemplate string `json:"topic_template"`
	// Authorizer is IoT Core's custom authorizer to name (also in URL);
	// empty for a broker that needs none (make run's).
	Authorizer string `json:"authorizer"`
}
