// Package wire holds the JSON bodies of the pendinguploads HTTP API
// (docs/API.md) that the server writes and the Go client reads, declared
// once: internal/httpapi encodes them, package client decodes them. It
// also names every error answer's stable code (Code), and holds the one
// rule of the contract both sides apply, SanitizeFilename.
//
// It imports nothing of the server: a workspace machine that builds the
// client builds this package and nothing more.
package wire
