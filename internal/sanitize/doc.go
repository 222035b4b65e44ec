// Package sanitize turns untrusted names and header values from clients
// into values that are safe to store, log and send back in HTTP headers.
//
// Every function here is pure: it depends on nothing but its argument, never
// fails, and is safe for concurrent use. The rules follow the HTTP contract
// (API.md, sections "SanitizeFilename", "SafeMimetype" and the content
// route's headers).
package sanitize
