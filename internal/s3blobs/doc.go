// Package s3blobs keeps file bytes in an S3 bucket: Put, ranged Open,
// CopyMeasured (a server-side copy measured by S3's own checksum),
// streamed Digest, batched Delete and List (the sweep's orphan marks) for
// the storage layer; multipart uploads (CreateMultipart, PresignPart,
// ListParts, CompleteMultipart, AbortMultipart) for files sent in parts;
// and presigned PUT and GET requests (PresignPut, PresignGet) that let
// clients move the bytes straight to and from S3.
//
// The storage layer chooses the keys: committed files under objects/,
// presigned uploads under staging/ until they are committed; a bucket
// lifecycle rule on staging/ removes the ones that never are.
//
// A Store holds no state of its own beyond its configuration and is safe for
// concurrent use once its exported fields are set. Absent objects are
// reported as ErrNotFound, which is pendinguploads.ErrBlobNotFound: the
// Store is that package's Bucket.
package s3blobs
