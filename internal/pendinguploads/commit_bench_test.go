package pendinguploads_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// BenchmarkCommit times Commit alone (presign and the PUT are outside the
// timer) for one file of 1, 25 and 100 MiB in moto: what a client waits
// for after its PUT. make bench reports it as ms per commit by size.
func BenchmarkCommit(b *testing.B) {
	s := openBucket(b)
	s.MaxFileBytes = pendinguploads.MaxFileBytesCap
	ctx := context.Background()
	ws := uuid.New()
	for _, mib := range []int{1, 25, 100} {
		data := make([]byte, mib<<20)
		rand.Read(data)
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				puts, err := s.Presign(ctx, nil, ws, []pendinguploads.Declared{{Filename: "f.bin", Size: int64(len(data))}})
				if err != nil {
					b.Fatal(err)
				}
				putPresigned(b, puts[0], data)
				b.StartTimer()
				if _, _, err := s.Commit(ctx, nil, ws, []uuid.UUID{puts[0].UploadID}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/commit")
		})
	}
}
