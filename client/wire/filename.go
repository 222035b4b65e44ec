package wire

import "strings"

// MaxFilenameBytes is the longest name SanitizeFilename returns, in bytes.
const MaxFilenameBytes = 100

// maxExtBytes is the longest extension, dot included, that SanitizeFilename keeps
// when it shortens a name.
const maxExtBytes = 16

// fallbackFilename replaces a name that would otherwise be empty, "." or "..".
const fallbackFilename = "file"

// SanitizeFilename returns a safe file name for name: API.md's
// SanitizeFilename, the name the server stores every file under and the one
// the inbox (package client/inbox) writes to disk, applied again to what a
// server answers. Its result is the seed platform's Python
// sanitize_filename's:
//
//  1. it keeps only the base name, the part after the last '/';
//  2. it replaces every rune outside [A-Za-z0-9._-] with one '_' (a space
//     too; each byte of invalid UTF-8 counts as one rune, U+FFFD);
//  3. if the result is longer than MaxFilenameBytes, it keeps the extension
//     (from the last '.') when that is at most 16 bytes with the dot, and
//     cuts the stem so that the whole is exactly MaxFilenameBytes; otherwise
//     it keeps the first MaxFilenameBytes bytes;
//  4. "", "." and ".." become "file".
//
// The result is therefore 1 to MaxFilenameBytes bytes of [A-Za-z0-9._-],
// never "." or "..", and SanitizeFilename(SanitizeFilename(x)) ==
// SanitizeFilename(x). Step 3 always leaves exactly MaxFilenameBytes
// bytes, so a shortened name can never become "", "." or ".."; step 4 is
// applied last all the same.
func SanitizeFilename(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}

	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if isFilenameRune(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String() // ASCII only from here on: bytes == characters

	if len(s) > MaxFilenameBytes {
		if dot := strings.LastIndexByte(s, '.'); dot >= 0 && len(s)-dot <= maxExtBytes {
			ext := s[dot:]
			s = s[:MaxFilenameBytes-len(ext)] + ext
		} else {
			s = s[:MaxFilenameBytes]
		}
	}

	switch s {
	case "", ".", "..":
		return fallbackFilename
	}
	return s
}

// isFilenameRune reports whether r may appear in a sanitized file name.
func isFilenameRune(r rune) bool {
	switch {
	case 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z', '0' <= r && r <= '9':
		return true
	case r == '.', r == '_', r == '-':
		return true
	}
	return false
}
