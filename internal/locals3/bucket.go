package locals3

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// CreateBucket creates bucket through client and configures it as
// template.yaml's ContentBucket: its lifecycle rules (Lifecycle) and, when
// corsOrigins is not empty, its CORS rule for those origins (CORS). A
// bucket that exists already and is the caller's is configured the same
// way. The template's encryption, public access block and ownership
// controls are not reproduced: they change nothing a local client sees.
func CreateBucket(ctx context.Context, client *s3.Client, bucket string, corsOrigins []string) error {
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	if _, err := client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket:                 aws.String(bucket),
		LifecycleConfiguration: Lifecycle(),
	}); err != nil {
		return fmt.Errorf("bucket %s: lifecycle: %w", bucket, err)
	}
	if len(corsOrigins) > 0 {
		if _, err := client.PutBucketCors(ctx, &s3.PutBucketCorsInput{
			Bucket:            aws.String(bucket),
			CORSConfiguration: CORS(corsOrigins),
		}); err != nil {
			return fmt.Errorf("bucket %s: cors: %w", bucket, err)
		}
	}
	return nil
}

// Lifecycle is the ContentBucket's lifecycle in template.yaml: presigned
// uploads never committed (staging/) expire after a day, and, as a
// backstop to the sweep, objects/ and the orphan marks (orphans/) after
// three; incomplete multipart uploads are aborted after a day under each.
// internal/deploytest holds it to the template.
func Lifecycle() *types.BucketLifecycleConfiguration {
	rule := func(id, prefix string, days int32) types.LifecycleRule {
		return types.LifecycleRule{
			ID:                             aws.String(id),
			Status:                         types.ExpirationStatusEnabled,
			Filter:                         &types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
			Expiration:                     &types.LifecycleExpiration{Days: aws.Int32(days)},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)},
		}
	}
	return &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
		rule("ExpireUncommittedStaging", "staging/", 1),
		rule("BackstopExpireObjects", "objects/", 3),
		rule("BackstopExpireOrphanMarks", "orphans/", 3),
	}}
}

// BucketOrigins are the origins of the ContentBucket's CORS rule in
// template.yaml: the API's browser origins (CORS_ALLOWED_ORIGINS) and its
// public origin (PUBLIC_ORIGIN, the canvas's own when the platform's edge
// routes the API there), which is cross-origin to the bucket's host all
// the same. internal/deploytest holds it to the template.
func BucketOrigins(corsAllowed []string, publicOrigin string) []string {
	out := append([]string(nil), corsAllowed...)
	if publicOrigin != "" {
		out = append(out, publicOrigin)
	}
	return out
}

// CORS is the ContentBucket's CORS rule in template.yaml for origins
// (BucketOrigins): browsers there may PUT presigned uploads
// and GET redirected downloads, sending only the headers a presigned PUT
// carries, and read ETag. internal/deploytest holds it to the template.
func CORS(origins []string) *types.CORSConfiguration {
	return &types.CORSConfiguration{CORSRules: []types.CORSRule{{
		AllowedMethods: []string{"PUT", "GET"},
		AllowedOrigins: origins,
		AllowedHeaders: []string{"Content-Type", "Content-Length", "x-amz-checksum-sha256", "x-amz-*"},
		ExposeHeaders:  []string{"ETag"},
		MaxAgeSeconds:  aws.Int32(600),
	}}}
}
