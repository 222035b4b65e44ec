package functions_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsiam"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// BenchmarkWarmUpload is one upload's latency on a warm stack, through
// the upload function's own binary under the Runtime API (issue 42's
// "before and after"): events/upload.json (two small files, the admin
// token), after two invocations that open the pool and prepare the
// statements, with push on. Side by side, in one run, on one database:
//
//	before     the database by password (DATABASE_URL: what DB_SECRET_ARN
//	           resolves to at a cold start) and the hint published to IoT
//	           Core's data endpoint (PUSH_ENDPOINT, iotcoretest's HTTPS
//	           Publish): the interface endpoints' way
//	hinttable  the same database, the hint written to the hint table
//	           (PUSH_HINT_TABLE, moto's DynamoDB): the gateway endpoint's way
//	after      the hint table, and the database through RDS IAM database
//	           authentication (DB_IAM_USER, internal/testkit/rdsiam): the
//	           template's way from zero. The stand-in relays every
//	           statement through one more loopback hop and TLS, which
//	           RDS does not, so this is an upper bound of the change.
//	putitem    the baseline of the hint table's cost: one PutItem of a
//	           hint's size to moto's table from this process (moto is
//	           Python; DynamoDB's own latency is not measured here)
//
//	go test ./functions -run '^$' -bench WarmUpload -benchtime 200x
func BenchmarkWarmUpload(b *testing.B) {
	ctx := context.Background()
	dbURL := knownDB(b)
	proxy := rdsiam.Start(b, dbURL) // creates rds_iam, as RDS has it
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	user, name := u.User.Username(), strings.TrimPrefix(u.Path, "/")
	if _, err := openPool(b, dbURL).Exec(ctx, `GRANT rds_iam TO `+user); err != nil {
		b.Fatal(err)
	}

	ep := s3test.MustStart(b)
	table, _ := s3test.NewStreamTable(b, ep, push.AttrID)
	iot := iotcoretest.Start(b, iotcoretest.Options{Authorize: func(context.Context, events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
		return events.IoTCoreCustomAuthorizerResponse{}, errors.New("no subscriber in this benchmark")
	}})
	certFile := filepath.Join(b.TempDir(), "iot.pem")
	if err := os.WriteFile(certFile, iot.CertPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	// The loop stages into one workspace as often as it runs.
	common := []string{"ADMIN_TOKEN=" + adminToken, "WORKSPACE_MAX_PENDING_BYTES=0", "WORKSPACE_MAX_PENDING_FILES=0"}
	password := append([]string{"DATABASE_URL=" + dbURL}, ep.Env()...)
	hintTable := []string{"PUSH_HINT_TABLE=" + table, "DYNAMODB_ENDPOINT=" + ep.URL}
	configs := []struct {
		name string
		env  []string
	}{
		{"before", append(append(append([]string{}, common...), password...),
			"PUSH_ENDPOINT="+iot.Endpoint(), "HTTPS_PROXY="+iot.ProxyURL.String(), "SSL_CERT_FILE="+certFile)},
		{"hinttable", append(append(append([]string{}, common...), password...), hintTable...)},
		{"after", append(append(append(append([]string{}, common...), proxy.Env(user, name)...), hintTable...),
			"AWS_ENDPOINT_URL_DYNAMODB="+ep.URL)},
	}
	b.Run("putitem", func(b *testing.B) {
		awsCfg := aws.Config{Region: s3test.Region, Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKeyID, s3test.SecretAccessKey, "")}
		t := push.NewTableFromAWS(awsCfg, table, ep.URL)
		payload := []byte(`{"workspace_id":"7c1e6a2e-3b1f-4c5d-9e8f-0a1b2c3d4e5f","file_ids":["91f71d26-c64e-4f75-a1ea-07d1afdb460f","5c6987ea-f111-48ef-9cdd-e246ff15474e"]}`)
		for b.Loop() {
			if err := t.Publish(ctx, "pendinguploads/7c1e6a2e-3b1f-4c5d-9e8f-0a1b2c3d4e5f/uploads", payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	event := readEvent(b, "upload")
	for _, c := range configs {
		rt := start(b, "upload", c.env...)
		for range 2 {
			if resp := invokeHTTP(b, rt, event); resp.StatusCode != http.StatusOK {
				b.Fatalf("%s: warm-up answered %d: %s\n%s", c.name, resp.StatusCode, resp.Body, rt.Logs())
			}
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if resp := invokeHTTP(b, rt, event); resp.StatusCode != http.StatusOK {
					b.Fatalf("answered %d: %s", resp.StatusCode, resp.Body)
				}
			}
		})
		if c.name == "before" && len(iot.PublishedMessages()) == 0 {
			b.Errorf("before: no hint reached the IoT stand-in; logs:\n%s", rt.Logs())
		}
	}
}
