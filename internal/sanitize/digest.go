package sanitize

import "encoding/base64"

// ContentDigest returns the value of a Content-Digest header (RFC 9530) for
// a SHA-256 sum: "sha-256=:<standard base64 of sum>:". sum should be the 32
// bytes of sha256.Sum256; ContentDigest encodes whatever it is given and
// does not check the length.
func ContentDigest(sum []byte) string {
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum) + ":"
}
