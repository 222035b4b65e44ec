package sanitize

import "github.com/pendinguploads/pendinguploads/client/wire"

// MaxFilenameBytes is the longest name Filename returns, in bytes.
const MaxFilenameBytes = wire.MaxFilenameBytes

// Filename returns a safe file name for name: wire.SanitizeFilename, the
// rule of API.md's SanitizeFilename, declared once in the client module
// (client/wire) because the Go client's inbox applies it again before it
// writes to disk. Its tests and fuzz target are this package's
// (filename_test.go): 1 to MaxFilenameBytes bytes of [A-Za-z0-9._-],
// never "." or "..", idempotent.
func Filename(name string) string { return wire.SanitizeFilename(name) }
