package sanitize

import "encoding/base64"

// Digest returns the value of a Repr-Digest or Content-Digest field (RFC
// 9530) for a SHA-256 sum: "sha-256=:<standard base64 of sum>:". sum
// should be the 32 bytes of sha256.Sum256; Digest encodes whatever it is
// given and does not check the length. Which field it goes in is the
// caller's: Repr-Digest for the whole file, Content-Digest for the bytes
// of the message (the same on a 200, a range's own on a 206).
func Digest(sum []byte) string {
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum) + ":"
}
