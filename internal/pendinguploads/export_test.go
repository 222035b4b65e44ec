package pendinguploads

// What the tests look at beyond the shipped surface.

// Inline is the bytes Fetch brought with the row; nil when it did not.
func (r Record) Inline() []byte { return r.content }

// Key is the object key of a file in the bucket; "" for an inline file.
func (r Record) Key() string { return r.s3Key }

// ListSQL is List's statement (listSQL) for a caller always allowed,
// from the first page or after @after_at, @after_file.
func ListSQL(after bool) string {
	if after {
		return listSQL("true", afterCursor)
	}
	return listSQL("true", "")
}

// PendingCount is the quota's count of what waits in @workspace.
const PendingCount = "SELECT " + pendingCount
