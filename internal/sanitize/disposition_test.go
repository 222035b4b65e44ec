package sanitize

import (
	"mime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestContentDisposition(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"Plain", "report.pdf",
			`attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`},
		{"Unreserved", "a-b_c.d~e",
			`attachment; filename="a-b_c.d~e"; filename*=UTF-8''a-b_c.d~e`},
		{"Space", "my file.txt",
			`attachment; filename="my file.txt"; filename*=UTF-8''my%20file.txt`},
		{"Quote", `say "hi".txt`,
			`attachment; filename="say \"hi\".txt"; filename*=UTF-8''say%20%22hi%22.txt`},
		{"Backslash", `a\b.txt`,
			`attachment; filename="a\\b.txt"; filename*=UTF-8''a%5Cb.txt`},
		{"CRLFInjection", "a.txt\r\nSet-Cookie: x=1",
			`attachment; filename="a.txtSet-Cookie: x=1"; filename*=UTF-8''a.txtSet-Cookie%3A%20x%3D1`},
		{"Controls", "a\x00b\x1fc\x7fd\te",
			`attachment; filename="abcde"; filename*=UTF-8''abcde`},
		{"UTF8", "中文.docx",
			`attachment; filename="__.docx"; filename*=UTF-8''%E4%B8%AD%E6%96%87.docx`},
		{"Accent", "résumé.pdf",
			`attachment; filename="r_sum_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`},
		{"InvalidUTF8", "a\xffb",
			`attachment; filename="a_b"; filename*=UTF-8''a%FFb`},
		{"Separators", "a;b=c,d'e%f",
			`attachment; filename="a;b=c,d'e%f"; filename*=UTF-8''a%3Bb%3Dc%2Cd%27e%25f`},
		{"Empty", "",
			`attachment; filename=""; filename*=UTF-8''`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ContentDisposition(tt.in); got != tt.want {
				t.Errorf("ContentDisposition(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestContentDispositionParses(t *testing.T) {
	for _, name := range []string{
		"report.pdf", `say "hi".txt`, `a\b\"c`, "中文.docx", "résumé final (2).pdf",
		"a;b=c,d'e%f", "😀", "~tilde~", "a.txt\r\nX: y", "",
	} {
		t.Run(name, func(t *testing.T) {
			if msg := checkContentDisposition(name, ContentDisposition(name)); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// withoutControls returns s with bytes below 0x20 and 0x7f removed.
func withoutControls(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// checkContentDisposition reports how out breaks ContentDisposition's
// contract for in, or "".
func checkContentDisposition(in, out string) string {
	for _, c := range []byte(out) {
		if isControl(c) {
			return "control byte in " + out
		}
	}
	quoted, _, _ := strings.Cut(strings.TrimPrefix(out, `attachment; filename="`), `"; filename*=`)
	for _, c := range []byte(quoted) {
		if c >= utf8.RuneSelf {
			return "non-ASCII in quoted filename of " + out
		}
	}
	if !utf8.ValidString(in) {
		return ""
	}
	disp, params, err := mime.ParseMediaType(out)
	switch {
	case err != nil:
		return "mime.ParseMediaType(" + out + "): " + err.Error()
	case disp != "attachment":
		return "disposition " + disp + ", want attachment"
	}
	if got, want := params["filename"], withoutControls(in); got != want {
		return "parsed filename " + strconv.Quote(got) + ", want " + strconv.Quote(want)
	}
	return ""
}

func FuzzContentDisposition(f *testing.F) {
	for _, s := range []string{
		"report.pdf", `"\`, "中文.docx", "a\r\nb", "\x00", "\xff", "", "a'b''c", "%41",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := ContentDisposition(in)
		if msg := checkContentDisposition(in, out); msg != "" {
			t.Errorf("ContentDisposition(%q) = %q: %s", in, out, msg)
		}
	})
}
