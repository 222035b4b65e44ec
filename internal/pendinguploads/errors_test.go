package pendinguploads_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

func TestIsUnavailable(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"DeadlineExceeded", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"ClientGone", context.Canceled, false},
		{"StatementTimeout", &pgconn.PgError{Code: "57014"}, true},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"ConnectionException", &pgconn.PgError{Code: "08006"}, true},
		{"SerializationFailure", &pgconn.PgError{Code: "40001"}, true},
		{"CheckViolation", &pgconn.PgError{Code: "23514"}, false},
		// The bucket's errors arrive classified (s3blobs).
		{"BucketUnavailable", fmt.Errorf("put: %w: SlowDown", pendinguploads.ErrUnavailable), true},
		{"Bug", errors.New("nil map"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pendinguploads.IsUnavailable(c.err); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
