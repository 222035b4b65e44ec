package sanitize

import (
	"strings"
	"unicode/utf8"
)

// ContentDisposition returns the value of a Content-Disposition header that
// offers filename as a download:
//
//	attachment; filename="<ascii>"; filename*=UTF-8''<percent-encoded>
//
// Control characters (bytes below 0x20, and 0x7f), CR and LF among them,
// are dropped from both forms, so the value can never split or end a
// header. In the quoted filename form, which old clients read, '"' and '\'
// are backslash-escaped and every non-ASCII rune (each invalid UTF-8 byte
// too) becomes '_'. The filename* form (RFC 6266, RFC 8187) carries the real
// name: every byte outside A-Za-z0-9-._~ is percent-encoded with upper-case
// hex. For a filename that is valid UTF-8, mime.ParseMediaType reads the
// result back as "attachment" with params["filename"] equal to filename
// without its control characters.
//
// ContentDisposition does not sanitize the name itself; pass it the stored
// name, which went through Filename.
func ContentDisposition(filename string) string {
	var quoted, ext strings.Builder
	quoted.Grow(len(filename) + 2)
	ext.Grow(len(filename) * 3)

	for i := 0; i < len(filename); {
		r, size := utf8.DecodeRuneInString(filename[i:])
		if size == 1 && isControl(filename[i]) {
			i++
			continue
		}
		switch {
		case r == '"' || r == '\\':
			quoted.WriteByte('\\')
			quoted.WriteRune(r)
		case r >= utf8.RuneSelf: // also an invalid byte, decoded as RuneError
			quoted.WriteByte('_')
		default:
			quoted.WriteRune(r)
		}
		for _, c := range []byte(filename[i : i+size]) {
			if isAttrChar(c) {
				ext.WriteByte(c)
			} else {
				const hex = "0123456789ABCDEF"
				ext.WriteByte('%')
				ext.WriteByte(hex[c>>4])
				ext.WriteByte(hex[c&0x0f])
			}
		}
		i += size
	}

	return `attachment; filename="` + quoted.String() + `"; filename*=UTF-8''` + ext.String()
}

// isControl reports whether c is an ASCII control character.
func isControl(c byte) bool {
	return c < 0x20 || c == 0x7f
}

// isAttrChar reports whether c is left as is in filename*: the unreserved
// characters of RFC 3986, a subset of RFC 8187's attr-char.
func isAttrChar(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	case c == '-', c == '.', c == '_', c == '~':
		return true
	}
	return false
}
