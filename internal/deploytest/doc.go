// Package deploytest holds the deployment files to the code: template.yaml
// passes cfn-lint, its HttpApi events are exactly internal/httpapi.Routes,
// each on the function built from the route's directory, and template.yaml,
// lambda.mk and the directories under functions/ name the same functions.
// functions/hello is the one exception: a test-only function (the
// lambdatest harness's own subject and the cold-start baseline) that is
// never deployed. The package has tests only.
package deploytest
