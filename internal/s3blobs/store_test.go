package s3blobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// head is a HEAD of key, around the Store.
func head(tb testing.TB, c *s3test.Objects, key string) *s3.HeadObjectOutput {
	tb.Helper()
	out, err := c.Client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key)})
	if err != nil {
		tb.Fatalf("head %s: %v", key, err)
	}
	return out
}

// binary returns n reproducible bytes covering every byte value, most of
// them invalid UTF-8.
func binary(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	copy(b, []byte{0x00, 0xff, 0xfe, 0xc3, 0x28, 0x80, '\r', '\n'})
	return b
}

// TestPut: what Put stores is read back byte-identical, with its size
// and Content-Type, around the Store.
func TestPut(t *testing.T) {
	t.Parallel()
	st, c := newStore(t)
	ctx := context.Background()
	tests := []struct {
		name, key, mimetype string
		content             []byte
	}{
		{"OneMiBBinary", "objects/a/1mib", "application/octet-stream", binary(1 << 20)},
		{"SmallText", "objects/a/small", "text/plain", []byte("héllo\x00wörld")},
		{"OneByte", "objects/a/one", "", []byte{0xff}},
		{"Empty", "objects/a/empty", "application/x-empty", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := st.Put(ctx, tt.key, tt.content, tt.mimetype); err != nil {
				t.Fatalf("Put: %v", err)
			}
			got, err := c.Get(ctx, tt.key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !bytes.Equal(got, tt.content) {
				t.Fatalf("Get: got %d bytes, want %d, not byte-identical", len(got), len(tt.content))
			}
			size, err := c.Size(ctx, tt.key)
			if err != nil {
				t.Fatalf("Size: %v", err)
			}
			if size != int64(len(tt.content)) {
				t.Errorf("Size: got %d, want %d", size, len(tt.content))
			}
			if tt.mimetype != "" {
				if ct := aws.ToString(head(t, c, tt.key).ContentType); ct != tt.mimetype {
					t.Errorf("Content-Type: got %q, want %q", ct, tt.mimetype)
				}
			}
		})
	}

	t.Run("Overwrite", func(t *testing.T) {
		if err := st.Put(ctx, "objects/a/over", []byte("first"), "text/plain"); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, "objects/a/over", []byte("2nd"), "text/plain"); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, "objects/a/over"); err != nil || string(got) != "2nd" {
			t.Errorf("Get: got %q, %v, want %q, nil", got, err, "2nd")
		}
	})
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	ctx := context.Background()

	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := st.Open(ctx, "objects/missing", 0, 1); !errors.Is(err, s3blobs.ErrNotFound) {
			t.Errorf("Open: got %v, want ErrNotFound", err)
		}
		if _, _, err := st.Digest(ctx, "objects/missing"); !errors.Is(err, s3blobs.ErrNotFound) {
			t.Errorf("Digest: got %v, want ErrNotFound", err)
		}
		// The storage layer matches its own sentinel: they are one.
		if _, err := st.Open(ctx, "objects/missing", 0, 1); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
			t.Errorf("Open: got %v, want pendinguploads.ErrBlobNotFound", err)
		}
	})

	t.Run("MissingBucketIsNotNotFound", func(t *testing.T) {
		client := s3test.NewClient(s3test.MustStart(t))
		st := s3blobs.NewFromClient(client, "s3blobs-no-such-bucket")
		_, err := st.Open(ctx, "objects/missing", 0, 1)
		if err == nil || errors.Is(err, s3blobs.ErrNotFound) {
			t.Errorf("Open: got %v, want a NoSuchBucket error that is not ErrNotFound", err)
		}
	})
}

func TestDigestErrTooLarge(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	ctx := context.Background()
	st.MaxSize = 10
	if err := st.Put(ctx, "objects/big", binary(11), ""); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "objects/fits", binary(10), ""); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.Digest(ctx, "objects/big"); !errors.Is(err, s3blobs.ErrTooLarge) {
		t.Errorf("Digest of 11 bytes: got %d bytes, %v, want ErrTooLarge", n, err)
	}
	if n, _, err := st.Digest(ctx, "objects/fits"); err != nil || n != 10 {
		t.Errorf("Digest of 10 bytes: got %d bytes, %v, want 10, nil", n, err)
	}
}

// getCounter counts the GETs a Store makes.
type getCounter struct {
	s3blobs.S3API
	gets atomic.Int64
}

func (g *getCounter) GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	g.gets.Add(1)
	return g.S3API.GetObject(ctx, in, optFns...)
}

// TestCopyMeasured: the copy holds the same bytes, and its size and
// SHA-256 come from the bucket's own checksum without a GET of the
// object: whether the PUT declared the digest or not (S3 carries a
// declared checksum over, and computes one for the copy otherwise).
func TestCopyMeasured(t *testing.T) {
	t.Parallel()
	st, c := newStore(t)
	counted := &getCounter{S3API: c.Client}
	measured := s3blobs.New(counted, nil, c.Bucket)
	ctx := context.Background()
	content := binary(300 << 10)
	sum := sha256.Sum256(content)
	if err := st.Put(ctx, "staging/w/u", content, "image/png"); err != nil {
		t.Fatal(err)
	}
	n, got, err := measured.CopyMeasured(ctx, "staging/w/u", "objects/w/f")
	if err != nil || n != int64(len(content)) || !bytes.Equal(got, sum[:]) {
		t.Fatalf("CopyMeasured: %d bytes, sha256 %x, %v; want %d, %x", n, got, err, len(content), sum)
	}
	if g := counted.gets.Load(); g != 0 {
		t.Fatalf("GETs of the object: %d, want 0", g)
	}
	copied, err := c.Get(ctx, "objects/w/f")
	if err != nil || !bytes.Equal(copied, content) {
		t.Fatalf("copied object: %d bytes, %v; want %d identical bytes", len(copied), err, len(content))
	}
	t.Run("ErrBlobNotFound", func(t *testing.T) {
		_, _, err := st.CopyMeasured(ctx, "staging/w/never", "objects/w/g")
		if !errors.Is(err, pendinguploads.ErrBlobNotFound) {
			t.Fatalf("got %v, want ErrBlobNotFound", err)
		}
	})
}

func TestDigest(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	ctx := context.Background()
	content := binary(3 << 20)
	if err := st.Put(ctx, "objects/d/1", content, ""); err != nil {
		t.Fatal(err)
	}
	n, sum, err := st.Digest(ctx, "objects/d/1")
	want := sha256.Sum256(content)
	if err != nil || n != int64(len(content)) || !bytes.Equal(sum, want[:]) {
		t.Fatalf("got %d %x %v, want %d %x", n, sum, err, len(content), want)
	}
	if _, _, err := st.Digest(ctx, "objects/d/absent"); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
		t.Fatalf("absent: got %v, want ErrBlobNotFound", err)
	}
}
