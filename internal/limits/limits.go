// Package limits is the one home of the service's caps: the per-file cap
// (MAX_FILE_BYTES: its default and its ceiling), the files of one request
// and the default request cap. The configuration, the store, the handlers
// and GET /uploads/limits read them from here; the Go client, a module of
// its own, restates the three it needs, and this package's test holds
// them equal.
package limits

const (
	// DefaultFileBytes is MAX_FILE_BYTES's default (25 MiB).
	DefaultFileBytes = 25 << 20
	// MaxFileBytes is the most MAX_FILE_BYTES may be (100 MiB): the
	// platform's own cap, and what the schema's CHECK allows.
	MaxFileBytes = 100 << 20
	// MaxFiles is how many files one upload or presign request carries
	// (max_attachments_per_message).
	MaxFiles = 64
	// DefaultRequestBytes is MAX_REQUEST_BYTES's default (4 MiB): what fits
	// a Lambda request after base64.
	DefaultRequestBytes = 4 << 20

	// MinPartBytes is the smallest part of a multipart upload but its
	// last (S3's own minimum, 5 MiB): MULTIPART_PART_BYTES's floor.
	MinPartBytes = 5 << 20
	// DefaultPartBytes is MULTIPART_PART_BYTES's default (8 MiB).
	DefaultPartBytes = 8 << 20
	// DefaultMultipartThresholdBytes is MULTIPART_THRESHOLD_BYTES's
	// default (16 MiB): a presigned file above it goes in parts, for a
	// client that takes them.
	DefaultMultipartThresholdBytes = 16 << 20
)
