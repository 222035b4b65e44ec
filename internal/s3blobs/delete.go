package s3blobs

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// MaxDeleteBatch is the most keys S3 accepts in one DeleteObjects request.
const MaxDeleteBatch = 1000

// DeleteError is S3's refusal to delete one key of a DeleteObjects batch.
type DeleteError struct {
	Key     string
	Code    string // S3's error code, such as AccessDenied
	Message string
}

func (e *DeleteError) Error() string {
	return fmt.Sprintf("delete %s: %s: %s", e.Key, e.Code, e.Message)
}

// Delete removes keys, sending at most MaxDeleteBatch per DeleteObjects
// request. Absent keys are not an error (S3 deletes them as a no-op), so a
// retried Delete is harmless; an empty slice sends nothing.
//
// When S3 refuses some keys, Delete still sends the remaining batches and
// then returns an error wrapping a *pendinguploads.PartialDeleteError that
// names every refused key and wraps a *DeleteError for the first.
// A failed request (transport, throttling after retries, a missing bucket)
// stops Delete at once; keys of earlier batches are gone by then.
func (s *Store) Delete(ctx context.Context, keys []string) error {
	var first *DeleteError
	var refused []string
	for start := 0; start < len(keys); start += MaxDeleteBatch {
		batch := keys[start:min(start+MaxDeleteBatch, len(keys))]
		objs := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("delete keys %d-%d of %d: %w", start, start+len(batch)-1, len(keys), classify(err))
		}
		for _, e := range out.Errors {
			refused = append(refused, aws.ToString(e.Key))
			if first == nil {
				first = &DeleteError{Key: aws.ToString(e.Key), Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)}
			}
		}
	}
	if first != nil {
		return fmt.Errorf("delete %d keys: %w", len(keys), &pendinguploads.PartialDeleteError{Refused: refused, Err: first})
	}
	return nil
}
