package pendinguploads

import "github.com/google/uuid"

// validateFile checks one file's size and name against the cap and the
// schema.
func validateFile(size int64, filename string, fileCap int64) error {
	switch {
	case size <= 0:
		return ErrEmptyContent
	case size > fileCap:
		return ErrTooLarge
	case filename == "":
		return ErrEmptyFilename
	case len(filename) > MaxFilenameBytes:
		return ErrFilenameTooLong
	}
	return nil
}

// andEach is " AND c" for each non-empty SQL condition c, to follow a
// condition.
func andEach(conds ...string) string {
	out := ""
	for _, c := range conds {
		if c != "" {
			out += " AND " + c
		}
	}
	return out
}

// uuidArray is ids as text, which pgx encodes for a uuid[] parameter in
// every query mode: it cannot encode a slice of uuid.UUID unprepared
// (exec mode, as behind RDS Proxy) nor in the simple protocol.
func uuidArray(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
