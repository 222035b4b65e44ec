package sanitize

import (
	"strings"
	"testing"
)

func TestFilename(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Every row of API.md's SanitizeFilename table.
		{"PathTraversal", "../../etc/passwd", "passwd"},
		{"Space", "hello world.pdf", "hello_world.pdf"},
		{"SpaceAndBang", "hello world!.pdf", "hello_world_.pdf"},
		{"Punctuation", "weird;chars!?.txt", "weird_chars__.txt"},
		{"NonASCII", "中文.docx", "__.docx"},
		{"Parentheses", "file (1).pdf", "file__1_.pdf"},
		{"Unchanged", "report-2026.05.04_v2.pdf", "report-2026.05.04_v2.pdf"},
		{"Empty", "", "file"},
		{"Dot", ".", "file"},
		{"DotDot", "..", "file"},
		{"LongKeepsExtension", strings.Repeat("b", 200) + ".pdf", strings.Repeat("b", 96) + ".pdf"},
		{"LongExtensionNotKept",
			strings.Repeat("c", 90) + ".thisisaverylongextensionnotpreserved",
			(strings.Repeat("c", 90) + ".thisisaverylongextensionnotpreserved")[:100]},

		// Edge cases.
		{"OnlySlash", "/", "file"},
		{"TrailingSlash", "dir/", "file"},
		{"TrailingSlashDotDot", "a/..", "file"},
		{"AbsolutePath", "/var/tmp/a.txt", "a.txt"},
		{"Backslashes", `C:\Users\me\a.txt`, "C__Users_me_a.txt"},
		{"BackslashTraversal", `..\..\x`, ".._.._x"},
		{"NUL", "a\x00b.txt", "a_b.txt"},
		{"CRLF", "a\r\nb", "a__b"},
		{"InvalidUTF8", "a\xff\xfeb", "a__b"},
		{"InvalidUTF8Truncated", "\xe4\xb8.txt", "__.txt"}, // two bytes of a three-byte rune
		{"Emoji", "😀.png", "_.png"},
		{"CombiningMark", "e\u0301.txt", "e_.txt"},
		{"Tab", "a\tb", "a_b"},
		{"Dotfile", ".bashrc", ".bashrc"},
		{"ThreeDots", "...", "..."},
		{"DotDotSlashDot", "../.", "file"},
		{"Exactly100", strings.Repeat("x", 96) + ".txt", strings.Repeat("x", 96) + ".txt"},
		{"Exactly101", strings.Repeat("x", 97) + ".txt", strings.Repeat("x", 96) + ".txt"},
		{"LongNoDot", strings.Repeat("y", 150), strings.Repeat("y", 100)},
		{"LongExtension16Kept",
			strings.Repeat("s", 100) + "." + strings.Repeat("e", 15),
			strings.Repeat("s", 84) + "." + strings.Repeat("e", 15)},
		{"LongExtension17Cut",
			strings.Repeat("s", 100) + "." + strings.Repeat("e", 16),
			strings.Repeat("s", 100)},
		{"LongDotfileWholeNameIsExtension", "." + strings.Repeat("r", 120), "." + strings.Repeat("r", 99)},
		{"LongTrailingDot", strings.Repeat("z", 120) + ".", strings.Repeat("z", 99) + "."},
		{"LongNonASCIICountedAfterReplacement",
			strings.Repeat("é", 60) + ".pdf", // 124 bytes in, 64 runes
			strings.Repeat("_", 60) + ".pdf"},
		{"LongAllDots", strings.Repeat(".", 150), strings.Repeat(".", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Filename(tt.in); got != tt.want {
				t.Errorf("Filename(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// checkFilename reports how out breaks Filename's contract for in, or "".
func checkFilename(in, out string) string {
	switch {
	case len(out) == 0 || len(out) > MaxFilenameBytes:
		return "length outside 1..100"
	case out == "." || out == "..":
		return "dot name"
	}
	for _, c := range []byte(out) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "byte outside [A-Za-z0-9._-]"
		}
	}
	if again := Filename(out); again != out {
		return "not idempotent: second pass gives " + again
	}
	return ""
}

func FuzzFilename(f *testing.F) {
	for _, s := range []string{
		"../../etc/passwd", "hello world!.pdf", "中文.docx", "", ".", "..", "/",
		strings.Repeat("b", 200) + ".pdf", "a\x00b", "\xff\xfe", ".bashrc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Filename(in)
		if msg := checkFilename(in, out); msg != "" {
			t.Errorf("Filename(%q) = %q: %s", in, out, msg)
		}
	})
}
