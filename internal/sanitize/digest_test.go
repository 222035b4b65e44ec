package sanitize

import (
	"crypto/sha256"
	"testing"
)

func TestDigest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// sha256("hello") = 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824
		{"Hello", "hello", "sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:"},
		// sha256("") = e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
		{"Empty", "", "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(tt.in))
			if got := Digest(sum[:]); got != tt.want {
				t.Errorf("Digest(sha256(%q)) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
