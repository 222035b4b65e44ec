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
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// maxParts bounds the parts ListParts reads of one upload (S3's own cap
// is 10,000; the service's files have at most 20).
const maxParts = 10_000

// CreateMultipart starts a multipart upload to key, of Content-Type
// mimetype (DefaultUploadType when empty), and returns S3's upload id.
// With checksums, every part must carry its SHA-256 (PresignPart binds
// it), and S3 keeps them.
func (s *Store) CreateMultipart(ctx context.Context, key, mimetype string, checksums bool) (string, error) {
	if mimetype == "" {
		mimetype = DefaultUploadType
	}
	in := &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key), ContentType: aws.String(mimetype)}
	if checksums {
		in.ChecksumAlgorithm = types.ChecksumAlgorithmSha256
	}
	out, err := s.api.CreateMultipartUpload(ctx, in)
	if err != nil {
		return "", fmt.Errorf("create multipart %s: %w", key, classify(err))
	}
	return aws.ToString(out.UploadId), nil
}

// PresignPart returns a presigned UploadPart of part number n of the
// multipart upload uploadID to key, valid for ttl, and the headers the
// client must send with it: Content-Length (size) is signed, and with
// sha256 (the part's digest) x-amz-checksum-sha256 too, so S3 refuses any
// other size or bytes.
func (s *Store) PresignPart(ctx context.Context, key, uploadID string, n int32, size int64, sha256 []byte, ttl time.Duration) (string, map[string]string, error) {
	if s.presign == nil {
		return "", nil, fmt.Errorf("presign part %s#%d: %w", key, n, errNoPresigner)
	}
	if size <= 0 || size > s.MaxSize || n < 1 || n > maxParts {
		return "", nil, fmt.Errorf("presign part %s#%d: size %d", key, n, size)
	}
	if err := checkTTL(ttl); err != nil {
		return "", nil, fmt.Errorf("presign part %s#%d: %w", key, n, err)
	}
	in := &s3.UploadPartInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		PartNumber: aws.Int32(n), ContentLength: aws.Int64(size),
	}
	want := map[string]string{"Content-Length": strconv.FormatInt(size, 10)}
	if sha256 != nil {
		if len(sha256) != 32 {
			return "", nil, fmt.Errorf("presign part %s#%d: a SHA-256 of %d bytes", key, n, len(sha256))
		}
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(sha256))
		want[ChecksumHeader] = *in.ChecksumSHA256
	}
	req, err := s.presign.PresignUploadPart(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", nil, fmt.Errorf("presign part %s#%d: %w", key, n, err)
	}
	if req.Method != http.MethodPut {
		return "", nil, fmt.Errorf("presign part %s#%d: presigned method %s", key, n, req.Method)
	}
	for name, v := range want {
		if got := req.SignedHeader.Get(name); got != v {
			return "", nil, fmt.Errorf("presign part %s#%d: signed %s is %q, want %q", key, n, name, got, v)
		}
	}
	return req.URL, want, nil
}

// ListParts returns the parts S3 holds of the multipart upload uploadID
// to key, in part-number order: what the bucket holds, never a client's
// word. An upload that is no more (completed or aborted) is an error
// wrapping ErrNotFound.
func (s *Store) ListParts(ctx context.Context, key, uploadID string) ([]pendinguploads.Part, error) {
	var parts []pendinguploads.Part
	var marker *string
	for len(parts) < maxParts {
		out, err := s.api.ListParts(ctx, &s3.ListPartsInput{
			Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: aws.String(uploadID), PartNumberMarker: marker,
		})
		if err != nil {
			if isNoSuchUpload(err) || isNotFound(err) {
				return nil, fmt.Errorf("list parts %s: %w", key, ErrNotFound)
			}
			return nil, fmt.Errorf("list parts %s: %w", key, classify(err))
		}
		for _, p := range out.Parts {
			parts = append(parts, pendinguploads.Part{Number: aws.ToInt32(p.PartNumber), Size: aws.ToInt64(p.Size),
				ETag: aws.ToString(p.ETag), ChecksumSHA256: aws.ToString(p.ChecksumSHA256)})
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		marker = out.NextPartNumberMarker
	}
	return parts, nil
}

// CompleteMultipart assembles the multipart upload uploadID to key from
// parts (as ListParts returned them): the object appears at key.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []pendinguploads.Part) error {
	done := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		done[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
		if p.ChecksumSHA256 != "" {
			done[i].ChecksumSHA256 = aws.String(p.ChecksumSHA256)
		}
	}
	_, err := s.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
	})
	if err != nil {
		if isNoSuchUpload(err) {
			return fmt.Errorf("complete multipart %s: %w", key, ErrNotFound)
		}
		return fmt.Errorf("complete multipart %s: %w", key, classify(err))
	}
	return nil
}

// AbortMultipart aborts the multipart upload uploadID to key: S3 drops its
// parts. An upload that is no more is already aborted.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	_, err := s.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
	})
	if err != nil && !isNoSuchUpload(err) && !isNotFound(err) {
		return fmt.Errorf("abort multipart %s: %w", key, classify(err))
	}
	return nil
}

// isNoSuchUpload reports whether err says the multipart upload is no
// more (completed or aborted). The SDK models NoSuchUpload as its own
// type for AbortMultipartUpload only; ListParts and
// CompleteMultipartUpload return it as a generic error with that code.
func isNoSuchUpload(err error) bool {
	var nsu *types.NoSuchUpload
	var coded smithy.APIError
	return errors.As(err, &nsu) || (errors.As(err, &coded) && coded.ErrorCode() == "NoSuchUpload")
}
