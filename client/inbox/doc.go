// Package inbox delivers a workspace's pending uploads into a directory,
// crash safely: it is what `pendingctl pull` runs. It is built on package
// client's public API alone: List, Resume (a download verified by size
// and SHA-256, resumed where a cut one stopped) and Ack.
//
//	c, err := client.New("https://api.example.com", token)
//	res, err := inbox.New(c, ws, "/srv/inbox").Pull(ctx)
//
// # Crash safety
//
// A Puller delivers into a directory D, keeping its state in
// D/.pendinguploads (mode 0700), so that a crash at any point neither
// loses a file nor, after the next pull, leaves two copies of it. For
// each pending upload, in list order:
//
//  1. Download to D/.pendinguploads/<file_id>.part (0600), hashing and
//     counting as it streams; the size must equal the list's size and
//     Content-Length, the SHA-256 the list's sha256 and the Repr-Digest
//     header, the whole file's (each where given). On any mismatch the .part is deleted and
//     the upload is left unacked: an error, not a file. Then fsync. A
//     .part already there (a download cut short) is resumed: its bytes
//     are hashed, the rest asked for with Range: bytes=<have>-, and the
//     whole file verified as above.
//  2. Choose the final name: wire.SanitizeFilename of the server's
//     name (sanitized again: this package writes to disk), or name-1.ext,
//     name-2.ext, … if taken.
//  3. Write the delivery record D/.pendinguploads/<file_id>.record
//     ({file_id, name, final, size, sha256}) atomically: temp file, fsync,
//     rename, fsync of the folder. This is the commit point: from here on
//     the file is never downloaded again.
//  4. Place it: link(.part, D/final), which fails rather than replace a
//     file that appeared meanwhile (then another name is recorded and
//     tried), fsync D, remove the .part, fsync the state folder. (Where
//     the file system has no hard links, rename is used after a check.)
//  5. Ack (retried; idempotent). Then remove the record.
//
// Every pull begins with recovery, before it lists: for each record, if
// its .part still exists and D/final is the same file (a crash between
// link and removal), the .part is removed; if D/final is absent, the
// .part is placed; if D/final is another file, a new name is recorded and
// the .part placed there. A record without a .part was placed already.
// Then the upload is acked (a 404 means expired or swept: the file is
// kept) and the record removed. A .part without a record is a download
// cut short: the upload being still unacked, step 1 resumes it; once the
// list no longer shows the upload, it is deleted. So a crash before step
// 3 costs at most the bytes in flight and nothing else; a
// crash after it costs nothing at all; and no upload is acked before its
// file is durable in D. A lock file (flock) keeps two pulls out of one
// directory. Removing D/.pendinguploads while a record is in it gives up
// that guarantee for the recorded files (the next pull fetches them again).
package inbox
