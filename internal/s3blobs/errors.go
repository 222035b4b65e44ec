package s3blobs

import (
	"errors"
	"fmt"

	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// classify marks an S3 error that means "retry later" as
// pendinguploads.ErrUnavailable, which the store and the HTTP layer
// answer with a 503: S3 throttling (SlowDown and its kin) or failing on
// its side after the SDK's own retries. S3's error codes are known here,
// where S3 is; the store sees only its sentinel. Any other error passes
// as it is.
func classify(err error) error {
	if err == nil || errors.Is(err, pendinguploads.ErrUnavailable) {
		return err
	}
	var coded smithy.APIError
	if errors.As(err, &coded) {
		switch coded.ErrorCode() {
		case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout",
			"Throttling", "ThrottlingException", "RequestLimitExceeded":
			return fmt.Errorf("%w: %w", pendinguploads.ErrUnavailable, err)
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return fmt.Errorf("%w: %w", pendinguploads.ErrUnavailable, err)
	}
	return err
}
