package pendinguploads_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

type codedErr struct {
	code   string
	status int
}

func (e codedErr) Error() string       { return e.code }
func (e codedErr) ErrorCode() string   { return e.code }
func (e codedErr) HTTPStatusCode() int { return e.status }

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
		{"S3SlowDown", codedErr{"SlowDown", 503}, true},
		{"S3InternalError", codedErr{"InternalError", 500}, true},
		{"S3AccessDenied", codedErr{"AccessDenied", 403}, false},
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
