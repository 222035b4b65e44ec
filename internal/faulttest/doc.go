// Package faulttest holds the fault tests of the service: a dependency
// taken away while requests run (Postgres stopped, frozen; S3 frozen), a
// failure injected at one item of a batch, sweeps racing acks and uploads.
// Every one runs the whole service (testkit/apptest) on a real Postgres,
// on loopback only, and every wait in them is bounded; their helpers are
// testkit/faultkit.
//
// The Postgres-stop and freeze tests live in pgdown, pgfreeze and
// s3freeze: each stops or freezes its test binary's own servers, so each
// gets a binary of its own.
package faulttest
