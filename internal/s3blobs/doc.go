// Package s3blobs keeps file bytes in an S3 bucket: whole-object Put, Get,
// Size and batched Delete for the storage layer, and presigned PUT and GET
// requests that let clients move the bytes straight to and from S3.
//
// Objects live under two prefixes. Committed files are under ObjectPrefix
// (ObjectKey); presigned uploads land under StagingPrefix (StagingKey) until
// they are committed, and a bucket lifecycle rule on that prefix removes the
// ones that never are.
//
// A Store holds no state of its own beyond its configuration and is safe for
// concurrent use once its exported fields are set. Absent objects are
// reported as ErrNotFound, which is pendinguploads.ErrBlobNotFound: the
// Store is that package's Blobs.
package s3blobs
