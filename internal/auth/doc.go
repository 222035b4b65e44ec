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
// is a Bearer identity whose token is looked up later, by the store call
// that serves the request, in that call's own round trip (Tokens.For
// gives the SQL), or on its own by Tokens.Verify. Only SHA-256 digests of
// tokens are stored and compared, and a session cookie is kept only as a
// digest in the verdict cache; neither is ever logged. Every failure to
// check fails closed: there is no fail-open mode.
package auth
