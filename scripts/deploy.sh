#!/usr/bin/env bash
# Deploys the stack with SAM CLI (make deploy; docs/deploy.md, "Deploy
# with SAM"): checks `sam --version` first, then `sam build`, then
# `sam deploy` with this script's arguments (--guided, --parameter-overrides
# …), samconfig.toml giving the rest.
#
# SAM CLI before 1.161.1 cannot deploy this template: its `sam package`
# (which `sam deploy` runs) leaves the AWS::Include Locations (openapi.yaml,
# dashboard.yaml) local in a template that also lists
# AWS::LanguageExtensions, and CloudFormation rejects the change set with
# "The location parameter is not a valid S3 uri" (aws/aws-sam-cli#9027,
# fixed by #9030, first released in v1.161.1). So an older sam stops here,
# before anything is built, with the version it needs.
#
# SAM names the sam binary (default: sam on PATH). SAM_CHECK_ONLY=1 checks
# the version and stops (make check-sam).
set -euo pipefail

SAM="${SAM:-sam}"
SAM_MIN_VERSION=1.161.1

need() {
  echo "deploy: SAM CLI $SAM_MIN_VERSION or later is needed ($1); older ones leave openapi.yaml and dashboard.yaml local in the packaged template, and CloudFormation refuses it (aws/aws-sam-cli#9027). Upgrade: docs/deploy.md, \"Prerequisites\"." >&2
  exit 1
}

command -v "$SAM" >/dev/null 2>&1 || need "no $SAM on PATH"
# `sam --version` prints "SAM CLI, version 1.161.1" (click's version line)
# on stdout; what Python may warn of goes to stderr, which is left alone.
out=$("$SAM" --version) || need "\`$SAM --version\` failed"
re='^SAM CLI, version ([0-9]+)\.([0-9]+)\.([0-9]+)([.a-z0-9]*)$'
[[ $out =~ $re ]] || need "\`$SAM --version\` says \"$out\", not a version"
have=("${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}")
IFS=. read -r -a want <<<"$SAM_MIN_VERSION"
for i in 0 1 2; do
  # 10#: a leading zero is not octal.
  if ((10#${have[i]} > 10#${want[i]})); then break; fi
  if ((10#${have[i]} < 10#${want[i]})); then need "this is $out"; fi
done

if [ "${SAM_CHECK_ONLY:-}" = 1 ]; then
  echo "deploy: $out (at least $SAM_MIN_VERSION)"
  exit 0
fi
"$SAM" build
"$SAM" deploy "$@"
