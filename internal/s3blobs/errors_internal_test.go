package s3blobs

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// TestClassify: S3's "retry later" errors (throttling, its own failures)
// become pendinguploads.ErrUnavailable here, where S3's codes are known;
// its refusals stay what they are.
func TestClassify(t *testing.T) {
	status := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("x")}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"SlowDown", &smithy.GenericAPIError{Code: "SlowDown"}, true},
		{"InternalError", &smithy.GenericAPIError{Code: "InternalError"}, true},
		{"Throttling", fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: "ThrottlingException"}), true},
		{"A5xxWithoutCode", status(502), true},
		{"AccessDenied", &smithy.GenericAPIError{Code: "AccessDenied"}, false},
		{"NoSuchBucket", &smithy.GenericAPIError{Code: "NoSuchBucket"}, false},
		{"A4xx", status(403), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := classify(c.err)
			if got := errors.Is(err, pendinguploads.ErrUnavailable); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if got := pendinguploads.IsUnavailable(err); got != c.want {
				t.Fatalf("IsUnavailable: got %v, want %v", got, c.want)
			}
			if !errors.Is(err, c.err) {
				t.Fatal("the cause is lost")
			}
		})
	}
}
