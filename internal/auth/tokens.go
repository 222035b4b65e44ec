package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// TokenPrefix starts every workspace token CreateToken mints, so a leaked
// one is easy to recognise (and to scan for). Tokens minted elsewhere (the
// platform's: base64url, no prefix) work the same: only the hash counts.
const TokenPrefix = "pu_"

// prefixLen is how much of a token is kept in clear to tell tokens apart:
// TokenPrefix and 6 characters, 36 bits of the 256.
const prefixLen = len(TokenPrefix) + 6

// NewToken returns a fresh random workspace token (256 bits).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// SafePrefix is the part of a token kept in clear to tell tokens apart
// (TokenPrefix and 6 characters, 36 bits of the 256), safe to show and to
// log.
func SafePrefix(token string) string { return token[:min(prefixLen, len(token))] }

// HashToken is the stored form of a token.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
