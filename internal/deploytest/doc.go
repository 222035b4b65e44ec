// Package deploytest holds the deployment files to the code: template.yaml
// passes cfn-lint; its REST API (logical ID Api, stage v1) is defined by
// openapi.yaml, whose every operation is a Lambda proxy integration of the
// function serving the route in internal/httpapi.Routes (the content route
// streaming); the functions' Api events (their invoke permissions) are the
// same routes plus their CORS preflights; the CORS origins reach the
// functions and the bucket; and template.yaml, lambda.mk and the
// directories under functions/ name the same functions: functions/ holds
// only deployed functions (the harness's hello-world lives in the test
// kit). The package has tests only.
package deploytest
