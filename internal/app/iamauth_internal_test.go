package app

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// TestIAMTokenCachedThenResigned: one token serves connects for
// IAMTokenReuse, then the next connect signs a new one; the token is
// a presigned connect for the user at DB_HOST:DB_PORT. Signing reads
// the credentials once per token (counted), with no network call.
func TestIAMTokenCachedThenResigned(t *testing.T) {
	var retrieved atomic.Int32
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		retrieved.Add(1)
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, nil
	})
	cfg := config.Config{DBIAMUser: "pendinguploads_app", AWSRegion: "eu-west-1", DBEndpoint: config.DBEndpoint{Host: "db.internal", Port: 5433}}
	tok := newIAMToken(cfg, creds)
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	tok.now = func() time.Time { return now }
	first, err := tok.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"db.internal:5433?", "Action=connect", "DBUser=pendinguploads_app", "X-Amz-Expires=900", "%2Feu-west-1%2Frds-db%2Faws4_request", "X-Amz-Signature="} {
		if !strings.Contains(first, want) {
			t.Errorf("token lacks %q", want)
		}
	}
	now = now.Add(IAMTokenReuse - time.Second)
	if _, err := tok.get(context.Background()); err != nil || retrieved.Load() != 1 {
		t.Fatalf("within IAMTokenReuse: %d signings, %v; want the cached token", retrieved.Load(), err)
	}
	now = now.Add(time.Second)
	if _, err := tok.get(context.Background()); err != nil || retrieved.Load() != 2 {
		t.Fatalf("at IAMTokenReuse: %d signings, %v; want a new token", retrieved.Load(), err)
	}
}

// TestIAMTokenWithoutCredentialsIsUnavailable: no credentials is
// ErrUnavailable (a 503), and the connect gets no password.
func TestIAMTokenWithoutCredentialsIsUnavailable(t *testing.T) {
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("aws config: no credentials")
	})
	tok := newIAMToken(config.Config{DBIAMUser: "u", AWSRegion: "us-east-1", DBEndpoint: config.DBEndpoint{Host: "h"}}, creds)
	if _, err := tok.get(context.Background()); !errors.Is(err, pendinguploads.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}
