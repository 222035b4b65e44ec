// Package auth owns who a request acts as: one Identity per request, of
// one of four kinds, and everything that checks one.
//
//   - Admin: the platform's admin token (a bearer), compared in constant
//     time with the configured one; every workspace.
//   - Workspace: a workspace token (a bearer) found live in
//     workspace_auth_tokens; its own workspace only.
//   - Org: an org API token (a bearer) found live in the platform's
//     org_api_tokens; every workspace of its org (an anchored token: the
//     workspaces whose org root is its anchor's).
//   - Session: the control plane's session cookie (no bearer), verified by
//     asking the control plane (Sessions); every workspace of this tenant.
//
// Authenticator.Identify makes the Identity from a request without the
// database: the admin and a session are settled there; any other bearer
// is a Bearer identity whose token the store looks up later, in the round
// trip of the call that serves the request (the token SQL is the store's:
// internal/pendinguploads/access.go), or on its own by Store.Verify. The
// store reads an identity only through Identity.Check, which refuses
// before any I/O what can act on no workspace (nil, the zero Identity,
// a token-backed one without its hash, a workspace token's for another
// workspace) and hands the store the request's record of the look-up
// (Found), which it fills in; the identity found is then a new value
// beside the presented one (FromContext). Identity's fields are
// unexported: no other package can assemble one. auth holds no SQL
// and asks no database. Sessions do ask the control plane over HTTP: that
// check is who the caller is, settled before any store call, and its
// verdict cache lives with it. Only SHA-256 digests of tokens are stored
// and compared, and a session cookie is kept only as a digest in the
// verdict cache; neither is ever logged. Every failure to check fails
// closed: there is no fail-open mode, and an Identity assembled outside
// this package is never trusted, whatever its Kind (Identity.Trusted).
package auth
