// Package contracttest holds openapi.yaml, the contract in the repository,
// to the code: the document parses and validates with kin-openapi, its
// paths and methods are exactly internal/httpapi.Routes plus a CORS
// preflight OPTIONS on every path, and the real handlers' answers (over a
// real Postgres, with a bucket on moto, through internal/testkit/apptest) validate
// against its schemas, statuses and headers. The package has tests only.
package contracttest
