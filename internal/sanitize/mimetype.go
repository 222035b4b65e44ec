package sanitize

import "strings"

// OctetStream is the media type served when a stored one is empty, and the
// one Mimetype returns for a value it rejects.
const OctetStream = "application/octet-stream"

// Mimetype returns a safe media type for a client's Content-Type value ct,
// following the contract's SafeMimetype:
//
//   - parameters are dropped (everything from the first ';'), and the rest
//     is trimmed of white space (strings.TrimSpace);
//   - an empty result stays "" (the content route serves it as OctetStream);
//   - a result with any byte outside 0x21–0x7e, or that is not exactly
//     "type/subtype" (one '/', both halves non-empty), becomes OctetStream;
//   - anything else is returned as given, case included.
//
// The result is "", OctetStream, or a type/subtype of printable ASCII
// without spaces, and Mimetype(Mimetype(x)) == Mimetype(x).
// MaxMimetypeBytes is the longest type kept: real ones are far shorter
// (RFC 6838 caps each half at 127 characters), and an unbounded one would
// bloat every listing it appears in.
const MaxMimetypeBytes = 255

func Mimetype(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	if ct == "" {
		return ""
	}
	if len(ct) > MaxMimetypeBytes {
		return OctetStream
	}
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c < 0x21 || c > 0x7e {
			return OctetStream
		}
	}
	typ, sub, ok := strings.Cut(ct, "/")
	if !ok || typ == "" || sub == "" || strings.Contains(sub, "/") {
		return OctetStream
	}
	return ct
}
