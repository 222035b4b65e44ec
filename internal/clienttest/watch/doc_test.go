// Package watch_test is package client/watch's tests against the whole service
// (internal/testkit/apptest: Postgres, moto, the local broker), kept in
// the server module: the client module (client/go.mod) cannot import the
// server's test kit. The client module's own tests need nothing of the server.
package watch_test
