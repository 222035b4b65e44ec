package pendinguploads

// What the tests look at beyond the shipped surface.

// Inline is the bytes Fetch brought with the row; nil when it did not.
func (r Record) Inline() []byte { return r.content }

// Key is the object key of a file in the bucket; "" for an inline file.
func (r Record) Key() string { return r.s3Key }

// SweepDeleteByIDSQL is a sweep pass's row delete with a bucket, kind
// "acked" or "expired": $1 the retention, $2 the ids.
func SweepDeleteByIDSQL(kind string) string {
	if kind == "expired" {
		return sweepExpired.deleteByID()
	}
	return sweepAcked.deleteByID()
}

// SweepBatchSQL is a sweep pass's batch statement, kind "acked" or
// "expired": with a bucket its select, without one its delete. $1 the
// retention in microseconds, $2 the batch, $3 and $4 the cursor.
func SweepBatchSQL(kind string, bucket bool) string {
	k := sweepAcked
	if kind == "expired" {
		k = sweepExpired
	}
	if bucket {
		return k.selectBatch()
	}
	return k.deleteBatch()
}
