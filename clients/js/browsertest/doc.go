// Package browsertest tests the browser client (clients/js) in headless
// Chromium against the real service: Postgres, moto, the app's handlers on
// a loopback origin, and the test page on other loopback origins, one
// allowed by CORS and one not. The tests are in the _test files; this
// package has no code of its own.
package browsertest
