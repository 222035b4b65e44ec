package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
	"github.com/pendinguploads/pendinguploads/internal/testkit/throttle"
)

// partsFileBytes is the file BenchmarkParts uploads: the largest the
// service takes.
const partsFileBytes = 100 << 20

// partsRate is the bandwidth of each connection to the bucket in
// BenchmarkParts: BENCH_PART_RATE bytes a second, 8 MiB/s by default (a
// 100 MiB PUT then takes about 12.5 s).
func partsRate(b *testing.B) int64 {
	v := os.Getenv("BENCH_PART_RATE")
	if v == "" {
		return 8 << 20
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("BENCH_PART_RATE=%q: want bytes a second", v)
	}
	return n
}

// BenchmarkParts times the Go client's upload of a 100 MiB file to a
// bucket (moto) reached through a link limited per connection
// (testkit/throttle, BENCH_PART_RATE), the way a client's path to S3 is
// bounded per TCP stream: in one PUT (a server whose multipart threshold
// is the file's size), and in 13 parts of 8 MiB (the server's defaults)
// with 1, 2 and 4 parts in flight. Each upload is timed whole (hash,
// presign, PUTs, commit: what a caller waits for) and by phase:
//
//	hash-s    Presign: the file read once through SHA-256 (and each
//	          part's), and the presign request
//	put-s     the PUT, or the parts'
//	commit-ms the commit (it assembles the parts: flat in the size)
//	MiB/s     the file's size over the whole upload
func BenchmarkParts(b *testing.B) {
	rate := partsRate(b)
	ep := s3test.MustStart(b)
	u, err := url.Parse(ep.URL)
	if err != nil {
		b.Fatal(err)
	}
	link := throttle.Start(b, u.Host, rate)
	server := func(env map[string]string) *apptest.Server {
		env["S3_ENDPOINT"] = link.URL()
		env["MAX_FILE_BYTES"] = fmt.Sprint(partsFileBytes)
		return apptest.NewServer(b, apptest.Options{S3: true, Env: env})
	}
	onePUT := server(map[string]string{"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(partsFileBytes)})
	inParts := server(map[string]string{})
	f := client.BytesFile("big.bin", "application/octet-stream", payload(partsFileBytes))
	for _, tc := range []struct {
		name     string
		srv      *apptest.Server
		inFlight int
	}{
		{"one-put", onePUT, 1},
		{"parts=1", inParts, 1},
		{"parts=2", inParts, 2},
		{"parts=4", inParts, 4},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := client.New(tc.srv.URL, tc.srv.AdminToken)
			if err != nil {
				b.Fatal(err)
			}
			c.PartsInFlight = tc.inFlight
			ws := uuid.New()
			var hash, put, commit time.Duration
			n := 0
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				t0 := time.Now()
				ups, err := c.Presign(ctx, ws, []client.UploadFile{f})
				if err != nil {
					b.Fatal(err)
				}
				if (ups[0].Multipart != nil) != (tc.name != "one-put") {
					b.Fatalf("%s: got a plan of parts %v", tc.name, ups[0].Multipart != nil)
				}
				t1 := time.Now()
				if err := c.PutPresigned(ctx, ups[0], f); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				staged, err := c.Commit(ctx, ws, []uuid.UUID{ups[0].UploadID})
				if err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				// moto keeps objects in memory: drop this one (not timed).
				if _, err := tc.srv.Objects.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(tc.srv.Bucket),
					Key: aws.String("objects/" + ws.String() + "/" + staged[0].FileID.String())}); err != nil {
					b.Fatal(err)
				}
				cancel()
				hash += t1.Sub(t0)
				put += t2.Sub(t1)
				commit += t3.Sub(t2)
				n++
			}
			total := (hash + put + commit).Seconds() / float64(n)
			b.ReportMetric(total, "s/upload")
			b.ReportMetric(hash.Seconds()/float64(n), "hash-s")
			b.ReportMetric(put.Seconds()/float64(n), "put-s")
			b.ReportMetric(float64(commit.Milliseconds())/float64(n), "commit-ms")
			b.ReportMetric(float64(partsFileBytes>>20)/total, "MiB/s")
			b.ReportMetric(float64(rate)/(1<<20), "link-MiB/s")
		})
	}
}
