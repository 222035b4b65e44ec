// Package deploytest holds the deployment files to the code: template.yaml
// passes cfn-lint; its REST API (logical ID Api, stage v1) is defined by
// openapi.yaml, whose every operation is a Lambda proxy integration of the
// function serving the route in internal/httpapi.Routes (the content route
// streaming); API Gateway's permissions to invoke the functions are the
// same routes plus their CORS preflights, on the v1 stage only; the CORS
// origins reach the
// functions and the bucket; and template.yaml, lambda.mk and the
// directories under functions/ name the same functions: functions/ holds
// only deployed functions (the harness's hello-world lives in the test
// kit). For a parameter set, the tests evaluate the template's Conditions
// and Rules as CloudFormation would (conditions_test.go) and hold each
// shape to what it must create: every default deploys from zero (its own
// network, database, secrets and bucket), and given a network and a
// database it creates none of them. The template CloudFormation gets is
// held too (translated_test.go): the SAM transform's output, made by the
// SAM translator cfn-lint ships (testdata/translate.py, after cfn-lint's
// expander of the AWS::LanguageExtensions loops) for three shapes,
// with one stage, the routes and their permissions on it, no reserved
// concurrency at the defaults, and the order of creation a first deploy
// needs; the stack's own network's zones are the parameters' when given
// (zones_test.go). docs/deploy.md is held to what it says: its
// prerequisites name every command its code blocks run and go.mod's Go
// (prerequisites_test.go); make deploy (scripts/deploy.sh) refuses a SAM
// CLI older than the one the template needs, before it builds
// (deploy_test.go); its route list beside the platform is openapi.yaml's
// operations (routelist_test.go); its deployer's IAM table is
// testdata/deployer-permissions.yaml rendered, with a row for every
// resource type a translated shape creates (deployer_test.go). What each
// shape costs a month idle (idle_test.go) is priced from the table in
// idleprices_test.go, every resource type priced or listed as free at
// rest, docs/capacity.md's idle tables checked against it.
// scripts/ensure-tools.sh, which make
// test runs first, names the missing Debian packages before it installs
// them, and with INSTALL=0 installs nothing and stops with the apt-get
// line to run (ensuretools_test.go). The package has tests only.
package deploytest
