package sanitize

import (
	"strings"
	"testing"
)

func TestMimetype(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"Plain", "application/pdf", "application/pdf"},
		{"ParametersDropped", "text/plain; charset=utf-8", "text/plain"},
		{"TrimmedAroundParameters", "  text/html ;charset=x", "text/html"},
		{"CaseKept", "Text/PLAIN", "Text/PLAIN"},
		{"Suffix", "application/vnd.api+json", "application/vnd.api+json"},
		{"Empty", "", ""},
		{"Blank", "   ", ""},
		{"OnlyParameters", "; charset=utf-8", ""},
		{"NoSlash", "pdf", OctetStream},
		{"TwoSlashes", "a/b/c", OctetStream},
		{"EmptyType", "/plain", OctetStream},
		{"EmptySubtype", "text/", OctetStream},
		{"OnlySlash", "/", OctetStream},
		{"InnerSpace", "text/ plain", OctetStream},
		{"InnerTab", "text/\tplain", OctetStream},
		{"CRLFInjection", "text/plain\r\nX-Evil: 1", OctetStream},
		{"NUL", "text/pl\x00ain", OctetStream},
		{"DEL", "text/plain\x7f", OctetStream},
		{"NonASCII", "text/plaîn", OctetStream},
		{"InvalidUTF8", "text/\xffplain", OctetStream},
		{"QuoteAllowed", `text/"x"`, `text/"x"`}, // printable ASCII, one slash
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Mimetype(tt.in); got != tt.want {
				t.Errorf("Mimetype(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// checkMimetype reports how out breaks Mimetype's contract, or "".
func checkMimetype(out string) string {
	if again := Mimetype(out); again != out {
		return "not idempotent: second pass gives " + again
	}
	if out == "" || out == OctetStream {
		return ""
	}
	for _, c := range []byte(out) {
		if c < 0x21 || c > 0x7e {
			return "byte outside 0x21-0x7e"
		}
	}
	typ, sub, _ := strings.Cut(out, "/")
	if strings.Count(out, "/") != 1 || typ == "" || sub == "" {
		return "not type/subtype"
	}
	if strings.Contains(out, ";") {
		return "parameters kept"
	}
	return ""
}

func FuzzMimetype(f *testing.F) {
	for _, s := range []string{
		"text/plain; charset=utf-8", "", " ", "a/b/c", "/x", "x/", "text/\x00",
		"Image/PNG", "\u00a0text/plain", "text/plain\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Mimetype(in)
		if msg := checkMimetype(out); msg != "" {
			t.Errorf("Mimetype(%q) = %q: %s", in, out, msg)
		}
	})
}

func TestMimetypeLengthCap(t *testing.T) {
	long := "application/" + strings.Repeat("x", MaxMimetypeBytes)
	if got := Mimetype(long); got != OctetStream {
		t.Fatalf("a %d-byte type: got %q, want %q", len(long), got, OctetStream)
	}
	atCap := "a/" + strings.Repeat("b", MaxMimetypeBytes-2)
	if got := Mimetype(atCap); got != atCap {
		t.Fatalf("a type of exactly %d bytes: got %q", MaxMimetypeBytes, got)
	}
}
