// Package awsenv builds the AWS SDK's configuration of a Lambda function
// from its environment alone: AWS_REGION, and its role's credentials in
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, which is
// how Lambda (and sam local invoke) hands them over. It does not link the
// SDK's shared-configuration loader, whose credential chain (profiles,
// SSO, STS, the instance metadata service) is a dozen packages that every
// cold start would initialise for nothing. Programs run by people
// (pendingctl, the dev server) use awsprofile instead.
package awsenv

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pendinguploads/pendinguploads/internal/awslog"
)

// Bounds of every AWS call the service makes (S3, Secrets Manager).
const (
	// DialTimeout bounds connecting. There is no bound on a whole
	// attempt: a streamed download (up to 100 MiB, at the client's pace)
	// may read its body for minutes; the caller's context bounds it.
	DialTimeout = 2 * time.Second
	// ResponseHeaderTimeout bounds the wait for an answer once a request
	// is sent: a frozen endpoint ends the attempt here, and the retries fit
	// inside a request's deadline (httpapi.RequestDeadline).
	ResponseHeaderTimeout = 4 * time.Second
	// RetryMaxAttempts is how many attempts, first included, the SDK's
	// standard retryer makes for one call.
	RetryMaxAttempts = 3
	// RetryMaxBackoff caps the wait between two attempts.
	RetryMaxBackoff = time.Second
)

// HTTPClient is the HTTP client of every AWS call: DialTimeout and
// ResponseHeaderTimeout.
func HTTPClient() aws.HTTPClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = DialTimeout }).
		WithTransportOptions(func(t *http.Transport) { t.ResponseHeaderTimeout = ResponseHeaderTimeout })
}

// Retryer is the SDK's standard retryer, at most RetryMaxAttempts
// attempts RetryMaxBackoff apart.
func Retryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = RetryMaxAttempts
		o.MaxBackoff = RetryMaxBackoff
	})
}

// Load returns the configuration getenv describes, the SDK logging
// through log (nil: slog.Default()). It fails without a region
// (AWS_REGION, or AWS_DEFAULT_REGION) or without both keys.
func Load(getenv func(string) string, log *slog.Logger) (aws.Config, error) {
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		return aws.Config{}, errors.New("aws config: no region (set AWS_REGION)")
	}
	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		return aws.Config{}, errors.New("aws config: no credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, as Lambda sets them)")
	}
	return aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, getenv("AWS_SESSION_TOKEN"))),
		HTTPClient:  HTTPClient(),
		Retryer:     Retryer,
		Logger:      awslog.SDKLogger(log),
		// The loader's defaults, which a hand-built configuration must say.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	}, nil
}
