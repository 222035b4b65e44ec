package s3blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// MaxObjectSize is the largest object a Store reads or presigns an upload
// for unless MaxSize says otherwise: the default per-file cap of 25 MiB
// (the app sets MaxSize to MAX_FILE_BYTES).
const MaxObjectSize int64 = limits.DefaultFileBytes

var (
	// ErrNotFound is returned (wrapped) by Open, CopyMeasured and Digest
	// when the key is absent. It is pendinguploads.ErrBlobNotFound, the
	// sentinel of the pendinguploads.Bucket interface this Store implements.
	ErrNotFound = pendinguploads.ErrBlobNotFound
	// ErrTooLarge is returned (wrapped) by Digest when the object is
	// larger than the Store's MaxSize, and by PresignPut for a size above it.
	ErrTooLarge = errors.New("s3blobs: object too large")
)

// S3API lists the S3 calls a Store makes. *s3.Client implements it; tests
// implement it to inject faults S3 cannot produce on demand.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
	CopyObject(ctx context.Context, in *s3.CopyObjectInput, optFns ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	ListParts(ctx context.Context, in *s3.ListPartsInput, optFns ...func(*s3.Options)) (*s3.ListPartsOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
	PutObjectTagging(ctx context.Context, in *s3.PutObjectTaggingInput, optFns ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error)
}

var _ pendinguploads.Bucket = (*Store)(nil)

// Presigner lists the presigning calls a Store makes. *s3.PresignClient
// implements it.
type Presigner interface {
	PresignPutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
	PresignUploadPart(ctx context.Context, in *s3.UploadPartInput, optFns ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
	PresignGetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

var (
	_ S3API     = (*s3.Client)(nil)
	_ Presigner = (*s3.PresignClient)(nil)
)

// Store keeps objects in one S3 bucket. It is safe for concurrent use; set
// its exported fields before first use and do not change them after.
type Store struct {
	api     S3API
	presign Presigner
	bucket  string

	// MaxSize is the largest object Digest reads and PresignPut signs an
	// upload for. Default (set by New): MaxObjectSize.
	MaxSize int64
}

// New returns a Store over bucket. presign may be nil when the caller never
// presigns; PresignPut and PresignGet then return an error.
func New(api S3API, presign Presigner, bucket string) *Store {
	return &Store{
		api:     api,
		presign: presign,
		bucket:  bucket,
		MaxSize: MaxObjectSize,
	}
}

// NewFromClient returns a Store over bucket that calls and presigns through
// client.
func NewFromClient(client *s3.Client, bucket string) *Store {
	return New(client, s3.NewPresignClient(client), bucket)
}

// Bucket returns the name of the Store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Put stores content under key, replacing any object there. mimetype
// becomes the object's Content-Type; an empty one is left unset (S3 then
// reports binary/octet-stream).
func (s *Store) Put(ctx context.Context, key string, content []byte, mimetype string) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(content),
		ContentLength: aws.Int64(int64(len(content))),
	}
	if mimetype != "" {
		in.ContentType = aws.String(mimetype)
	}
	if _, err := s.api.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put %s: %w", key, classify(err))
	}
	return nil
}

// Open returns n bytes of the object under key from offset off, streamed
// from S3 (a ranged GET unless the range is the whole object). The object
// is asked for before Open returns, so an absent key is an error wrapping
// ErrNotFound, and an answer of another length than n an error, before any
// byte is read. The reader then yields exactly n bytes, or fails with
// io.ErrUnexpectedEOF.
func (s *Store) Open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n <= 0 {
		return nil, fmt.Errorf("open %s: no bytes in range %d+%d", key, off, n)
	}
	// Always a ranged GET, the whole object included: an object longer
	// than the row says is then read no further.
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
	})
	if err != nil {
		if isNotFound(err) {
			return nil, s.notFound("open", key)
		}
		return nil, fmt.Errorf("open %s: %w", key, classify(err))
	}
	if got := aws.ToInt64(out.ContentLength); got != n {
		out.Body.Close()
		return nil, fmt.Errorf("open %s: %d bytes from %d, S3 answered %d", key, n, off, got)
	}
	return &exactReader{rc: out.Body, left: n}, nil
}

// exactReader yields exactly left bytes of rc, or io.ErrUnexpectedEOF.
type exactReader struct {
	rc   io.ReadCloser
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.rc.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (e *exactReader) Close() error { return e.rc.Close() }

// CopyMeasured copies the object at src to dst inside the bucket,
// server-side (CopyObject takes up to 5 GB), and returns the copy's size
// and SHA-256 without reading its bytes through this process: the copy
// asks S3 for a SHA-256 checksum, which S3 carries over from a PUT that
// declared one (and that S3 verified then) or computes over the bytes as
// it copies, and a HEAD of the copy gives its size. Only when the answer
// holds no full-object SHA-256 (a store that does not compute checksums,
// a composite one) are the bytes read and hashed (Digest). It returns an
// error wrapping ErrNotFound when src is absent.
func (s *Store) CopyMeasured(ctx context.Context, src, dst string) (int64, []byte, error) {
	out, err := s.api.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(dst),
		CopySource:        aws.String(s.bucket + "/" + src), // keys are [0-9a-f/-]: nothing to escape
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		if isNotFound(err) {
			return 0, nil, s.notFound("copy", src)
		}
		return 0, nil, fmt.Errorf("copy %s to %s: %w", src, dst, classify(err))
	}
	sum := fullObjectSHA256(out.CopyObjectResult)
	if sum == nil {
		return s.Digest(ctx, dst)
	}
	head, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(dst)})
	if err != nil {
		return 0, nil, fmt.Errorf("copy %s to %s: head: %w", src, dst, classify(err))
	}
	if head.ContentLength == nil {
		return 0, nil, fmt.Errorf("copy %s to %s: no Content-Length in the HEAD", src, dst)
	}
	return *head.ContentLength, sum, nil
}

// fullObjectSHA256 is the SHA-256 of a whole object in a copy's answer,
// or nil: absent, composite (a digest of part digests, "…-N"), or not 32
// bytes.
func fullObjectSHA256(r *types.CopyObjectResult) []byte {
	if r == nil || r.ChecksumSHA256 == nil || r.ChecksumType == types.ChecksumTypeComposite {
		return nil
	}
	sum, err := base64.StdEncoding.DecodeString(*r.ChecksumSHA256)
	if err != nil || len(sum) != 32 {
		return nil
	}
	return sum
}

// notFound returns the error for an absent key.
func (s *Store) notFound(op, key string) error {
	return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
}

// isNotFound reports whether err says the key is absent: NoSuchKey from
// GET, NotFound (a bare 404: HEAD responses have no body) from HEAD, or a
// 404 that carries no error code at all. Any other coded 404, such as
// NoSuchBucket, is a configuration fault and stays an ordinary error. (HEAD
// cannot tell a missing bucket from a missing key: both are a bare 404.)
func isNotFound(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		case "":
		default:
			return false
		}
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// Digest streams the object under key through SHA-256 and returns its
// size and sum, holding no more than a read buffer in memory. It returns
// an error wrapping ErrNotFound when the key is absent, and one wrapping
// ErrTooLarge for an object over MaxSize.
func (s *Store) Digest(ctx context.Context, key string) (int64, []byte, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if isNotFound(err) {
			return 0, nil, s.notFound("digest", key)
		}
		return 0, nil, fmt.Errorf("digest %s: %w", key, classify(err))
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(out.Body, s.MaxSize+1))
	if err != nil {
		return 0, nil, fmt.Errorf("digest %s: read body: %w", key, err)
	}
	if n > s.MaxSize {
		return 0, nil, fmt.Errorf("digest %s: more than %d bytes: %w", key, s.MaxSize, ErrTooLarge)
	}
	return n, h.Sum(nil), nil
}

// List returns up to limit (at most 1000) objects under prefix, in key
// order, with their last-modified times.
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]pendinguploads.Blob, error) {
	out, err := s.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket:  aws.String(s.bucket),
		Prefix:  aws.String(prefix),
		MaxKeys: aws.Int32(int32(min(max(limit, 1), 1000))),
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, classify(err))
	}
	blobs := make([]pendinguploads.Blob, len(out.Contents))
	for i, o := range out.Contents {
		blobs[i] = pendinguploads.Blob{Key: aws.ToString(o.Key), Modified: aws.ToTime(o.LastModified)}
	}
	return blobs, nil
}
