package s3blobs_test

import (
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// newStore returns a Store over a fresh bucket on moto, and the bucket
// through the SDK alone, for checks that go around the Store.
func newStore(tb testing.TB) (*s3blobs.Store, *s3test.Objects) {
	tb.Helper()
	client, bucket := s3test.NewBucket(tb, s3test.MustStart(tb))
	return s3blobs.NewFromClient(client, bucket), &s3test.Objects{Client: client, Bucket: bucket}
}
