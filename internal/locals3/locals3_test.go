package locals3_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pendinguploads/pendinguploads/internal/locals3"
)

func startServer(t *testing.T) *locals3.Server {
	t.Helper()
	s, err := locals3.Start(locals3.Options{})
	if errors.Is(err, locals3.ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TestCreateBucketAsTheTemplate: the bucket gets the template's lifecycle
// and CORS rules, read back from the server; creating it again is fine;
// Stop leaves nothing listening.
func TestCreateBucketAsTheTemplate(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := s.Client()
	origins := []string{"http://localhost:5173"}
	for range 2 {
		if err := locals3.CreateBucket(ctx, client, "uploads", origins); err != nil {
			t.Fatal(err)
		}
	}
	lc, err := client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String("uploads")})
	if err != nil {
		t.Fatal(err)
	}
	want := locals3.Lifecycle().Rules
	if len(lc.Rules) != len(want) {
		t.Fatalf("lifecycle: got %d rules, want %d", len(lc.Rules), len(want))
	}
	for i, r := range lc.Rules {
		w := want[i]
		if aws.ToString(r.ID) != aws.ToString(w.ID) || r.Status != w.Status ||
			aws.ToString(r.Filter.Prefix) != aws.ToString(w.Filter.Prefix) ||
			aws.ToInt32(r.Expiration.Days) != aws.ToInt32(w.Expiration.Days) {
			t.Errorf("lifecycle rule %d: got %s %s %s %d days, want %s %s %s %d days", i,
				aws.ToString(r.ID), r.Status, aws.ToString(r.Filter.Prefix), aws.ToInt32(r.Expiration.Days),
				aws.ToString(w.ID), w.Status, aws.ToString(w.Filter.Prefix), aws.ToInt32(w.Expiration.Days))
		}
	}
	cors, err := client.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: aws.String("uploads")})
	if err != nil {
		t.Fatal(err)
	}
	wantCORS := locals3.CORS(origins).CORSRules[0]
	if len(cors.CORSRules) != 1 || !reflect.DeepEqual(cors.CORSRules[0].AllowedOrigins, origins) ||
		!reflect.DeepEqual(cors.CORSRules[0].AllowedMethods, wantCORS.AllowedMethods) ||
		!reflect.DeepEqual(cors.CORSRules[0].AllowedHeaders, wantCORS.AllowedHeaders) {
		t.Errorf("cors: got %+v, want %+v", cors.CORSRules, wantCORS)
	}

	u, _ := url.Parse(s.URL())
	s.Stop()
	s.Stop() // a second Stop does nothing
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still answers after Stop", u.Host)
	}
}
