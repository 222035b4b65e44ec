// Package auth checks bearer tokens and keeps workspace tokens.
//
// Two kinds of token: the admin token (the platform's), which may act on
// every workspace, and workspace tokens, each of which may act only on its
// own workspace. Only the SHA-256 of a workspace token is stored; the token
// itself is shown once, by CreateToken. Secrets are compared in constant
// time and never logged. There is no fail-open mode.
package auth
