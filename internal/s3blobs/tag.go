package s3blobs

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Tag sets the object's tags to the one tag k=v, as GuardDuty Malware
// Protection for S3 tags a scanned object (GuardDutyMalwareScanStatus):
// the dev server's scanner stand-in does it likewise. An absent object
// wraps pendinguploads.ErrBlobNotFound.
func (s *Store) Tag(ctx context.Context, key, k, v string) error {
	_, err := s.api.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{
		Bucket:  aws.String(s.bucket),
		Key:     aws.String(key),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String(k), Value: aws.String(v)}}},
	})
	if err != nil {
		return fmt.Errorf("tag %s: %w", key, classify(err))
	}
	return nil
}
