package s3blobs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MaxPresignTTL is the longest validity SigV4 allows a presigned request.
const MaxPresignTTL = 7 * 24 * time.Hour

// DefaultUploadType is the Content-Type PresignPut binds when given none.
const DefaultUploadType = "application/octet-stream"

// ResponseCacheControl is the Cache-Control a PresignGet response carries.
const ResponseCacheControl = "private, no-store"

var errNoPresigner = errors.New("s3blobs: store has no presigner")

// ChecksumHeader carries a PUT's declared SHA-256 (base64), which S3
// checks the bytes against.
const ChecksumHeader = "x-amz-checksum-sha256"

// PresignPut returns a presigned PUT of key valid for ttl, and the headers
// the client must send with it. Content-Length (size) and Content-Type
// (mimetype, or DefaultUploadType when empty) are signed headers: S3 refuses
// the request if the client sends another value for either. With sha256
// (the file's digest, as the client declared it), x-amz-checksum-sha256 is
// a signed header too, and S3 refuses a PUT whose bytes do not match it.
//
// The headers map holds exactly "Content-Type" and "Content-Length", and
// "x-amz-checksum-sha256" (base64) with sha256. size must be 1..MaxSize
// (else an error wrapping ErrTooLarge for too large), sha256 nil or 32
// bytes, ttl in (0, MaxPresignTTL]. A URL signed with temporary
// credentials (a Lambda role) stops working when they expire, whichever
// comes first.
func (s *Store) PresignPut(ctx context.Context, key string, size int64, mimetype string, sha256 []byte, ttl time.Duration) (url string, headers map[string]string, err error) {
	if s.presign == nil {
		return "", nil, fmt.Errorf("presign put %s: %w", key, errNoPresigner)
	}
	if size <= 0 {
		return "", nil, fmt.Errorf("presign put %s: size %d, want at least 1", key, size)
	}
	if size > s.MaxSize {
		return "", nil, fmt.Errorf("presign put %s: size %d, max %d: %w", key, size, s.MaxSize, ErrTooLarge)
	}
	if err := checkTTL(ttl); err != nil {
		return "", nil, fmt.Errorf("presign put %s: %w", key, err)
	}
	if sha256 != nil && len(sha256) != 32 {
		return "", nil, fmt.Errorf("presign put %s: a SHA-256 of %d bytes", key, len(sha256))
	}
	if mimetype == "" {
		mimetype = DefaultUploadType
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		ContentLength: aws.Int64(size),
		ContentType:   aws.String(mimetype),
	}
	want := map[string]string{
		"Content-Type":   mimetype,
		"Content-Length": strconv.FormatInt(size, 10),
	}
	if sha256 != nil {
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(sha256))
		want[ChecksumHeader] = *in.ChecksumSHA256
	}
	req, err := s.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", nil, fmt.Errorf("presign put %s: %w", key, err)
	}
	if req.Method != http.MethodPut {
		return "", nil, fmt.Errorf("presign put %s: presigned method %s", key, req.Method)
	}
	// The signer must have signed every header; if a future SDK stops
	// signing one, fail here rather than hand out an unbounded upload.
	for name, v := range want {
		if got := req.SignedHeader.Get(name); got != v {
			return "", nil, fmt.Errorf("presign put %s: signed %s is %q, want %q", key, name, got, v)
		}
	}
	return req.URL, want, nil
}

// PresignGet returns a presigned GET of key valid for ttl, whose response
// carries contentType as Content-Type, contentDisposition (already built by
// the caller) as Content-Disposition, and ResponseCacheControl, whatever
// the object's own metadata says. Empty contentType or contentDisposition
// leave the object's own header. ttl must be in (0, MaxPresignTTL].
func (s *Store) PresignGet(ctx context.Context, key, contentDisposition, contentType string, ttl time.Duration) (string, error) {
	if s.presign == nil {
		return "", fmt.Errorf("presign get %s: %w", key, errNoPresigner)
	}
	if err := checkTTL(ttl); err != nil {
		return "", fmt.Errorf("presign get %s: %w", key, err)
	}
	in := &s3.GetObjectInput{
		Bucket:               aws.String(s.bucket),
		Key:                  aws.String(key),
		ResponseCacheControl: aws.String(ResponseCacheControl),
	}
	if contentType != "" {
		in.ResponseContentType = aws.String(contentType)
	}
	if contentDisposition != "" {
		in.ResponseContentDisposition = aws.String(contentDisposition)
	}
	req, err := s.presign.PresignGetObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign get %s: %w", key, err)
	}
	return req.URL, nil
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxPresignTTL {
		return fmt.Errorf("ttl %v, want in (0, %v]", ttl, MaxPresignTTL)
	}
	return nil
}
