package pendinguploads

// What the tests look at beyond the shipped surface.

// Inline is the bytes Fetch brought with the row; nil when it did not.
func (r Record) Inline() []byte { return r.content }

// Key is the object key of a file in the bucket; "" for an inline file.
func (r Record) Key() string { return r.s3Key }
