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
// reported as ErrNotFound, and also as the Store's NotFoundErr when that is
// set, so a caller can match its own sentinel with errors.Is without this
// package importing it.
package s3blobs
