package pendinguploads_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtrace"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// BenchmarkCommit times Commit alone (presign and the PUT are outside the
// timer) for one file of 1, 25 and 100 MiB in moto: what a client waits
// for after its PUT. Beside it, the baseline: moto's own server-side
// CopyObject of the same object, which moto runs in its process at a
// cost that grows with the size (S3 copies inside its own fleet). What
// the commit adds over that copy is what this service spends; make bench
// reports both, by size.
//
// The 25 and 100 MiB files are also sent in parts of 8 MiB (NMiB/parts):
// that commit lists the parts and completes the upload before the copy;
// its baseline (NMiB/parts/moto) is moto's own CompleteMultipartUpload of
// the same parts, the CopyObject, the HeadObject of the copy and the
// DeleteObject of the staging object (the commit's bucket calls but its
// ListParts), which moto runs at a cost that grows with the size (S3
// assembles and copies inside its fleet).
func BenchmarkCommit(b *testing.B) {
	client, bucket := s3test.NewBucket(b, s3test.MustStart(b))
	blobs := s3blobs.NewFromClient(client, bucket)
	blobs.MaxSize = limits.MaxFileBytes
	cfg, err := pgxpool.ParseConfig(pgtest.MustURL(b))
	if err != nil {
		b.Fatal(err)
	}
	trips := &pgtrace.RoundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	s := pendinguploads.New(pool, blobs, apptest.StoreSettings())
	s.MaxFileBytes = limits.MaxFileBytes
	ctx := context.Background()
	ws := uuid.New()
	// Warm: the commit's statements prepared on the pool's connection.
	warm, err := s.Presign(ctx, auth.AdminIdentity(), ws, []pendinguploads.Declared{{Filename: "warm.bin", Size: 1}})
	if err != nil {
		b.Fatal(err)
	}
	putPresigned(b, warm[0], []byte{1})
	if _, _, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{warm[0].UploadID}); err != nil {
		b.Fatal(err)
	}
	for _, mib := range []int{1, 25, 100} {
		data := make([]byte, mib<<20)
		rand.Read(data)
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			var n, commitTrips int64
			for b.Loop() {
				b.StopTimer()
				puts, err := s.Presign(ctx, auth.AdminIdentity(), ws, []pendinguploads.Declared{{Filename: "f.bin", Size: int64(len(data))}})
				if err != nil {
					b.Fatal(err)
				}
				putPresigned(b, puts[0], data)
				trips.Reset()
				b.StartTimer()
				if _, _, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				commitTrips += trips.Count()
				n++
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/commit")
			b.ReportMetric(float64(commitTrips)/float64(n), "trips/op")
		})
		b.Run(fmt.Sprintf("%dMiB/moto-copy", mib), func(b *testing.B) {
			if err := blobs.Put(ctx, "staging/bench", data, ""); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := client.CopyObject(ctx, &s3.CopyObjectInput{
					Bucket: aws.String(bucket), Key: aws.String("objects/bench"), CopySource: aws.String(bucket + "/staging/bench"),
					ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/copy")
		})
		if mib < 25 {
			continue
		}
		b.Run(fmt.Sprintf("%dMiB/parts", mib), func(b *testing.B) {
			var n, commitTrips int64
			for b.Loop() {
				b.StopTimer()
				puts, err := s.Presign(ctx, auth.AdminIdentity(), ws, []pendinguploads.Declared{{Filename: "f.bin", Size: int64(len(data)), Multipart: true}})
				if err != nil {
					b.Fatal(err)
				}
				if puts[0].Multipart == nil {
					b.Fatal("presign: no plan of parts")
				}
				for _, p := range puts[0].Multipart.Parts {
					off := int64(p.Number-1) * puts[0].Multipart.PartBytes
					putPresigned(b, pendinguploads.PresignedPut{URL: p.URL, Headers: p.Headers}, data[off:off+p.Size])
				}
				trips.Reset()
				b.StartTimer()
				if _, _, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				commitTrips += trips.Count()
				n++
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/commit")
			b.ReportMetric(float64(commitTrips)/float64(n), "trips/op")
		})
		b.Run(fmt.Sprintf("%dMiB/parts/moto", mib), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				parts := uploadParts(b, client, bucket, "staging/bench-parts", data, limits.DefaultPartBytes)
				b.StartTimer()
				if _, err := client.CompleteMultipartUpload(ctx, parts); err != nil {
					b.Fatal(err)
				}
				if _, err := client.CopyObject(ctx, &s3.CopyObjectInput{
					Bucket: aws.String(bucket), Key: aws.String("objects/bench-parts"), CopySource: aws.String(bucket + "/staging/bench-parts"),
					ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
				}); err != nil {
					b.Fatal(err)
				}
				if _, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("objects/bench-parts")}); err != nil {
					b.Fatal(err)
				}
				if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("staging/bench-parts")}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/assembly")
		})
	}
}

// uploadParts starts a multipart upload of data under key, sends its
// parts of partBytes, and returns the call that completes it.
func uploadParts(b *testing.B, client *s3.Client, bucket, key string, data []byte, partBytes int) *s3.CompleteMultipartUploadInput {
	b.Helper()
	ctx := context.Background()
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		b.Fatal(err)
	}
	done := &types.CompletedMultipartUpload{}
	for n, off := int32(1), 0; off < len(data); n, off = n+1, off+partBytes {
		part := data[off:min(off+partBytes, len(data))]
		out, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part)))})
		if err != nil {
			b.Fatal(err)
		}
		done.Parts = append(done.Parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	return &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId, MultipartUpload: done}
}
