# pendinguploads: `make run` starts the service locally, `make test` runs
# every test and check. See README.md.

GO ?= go
PKGS := ./...

.DEFAULT_GOAL := help

.PHONY: help run test tools vet fmt-check gotest bench fuzz load clean

help:
	@echo "make run     start the whole service locally (port 8080; its own Postgres unless DATABASE_URL is set)"
	@echo "make test    every test and check: gofmt, go vet, cfn-lint, go test -race"
	@echo "make build   every Lambda function as Lambda builds it, into bin/<fn>/bootstrap"
	@echo "make bench   benchmarks with their baselines and a report"
	@echo "make fuzz    each fuzz target for FUZZTIME (default 30s)"
	@echo "make load    a bounded load run against a local dev server"

run:
	$(GO) run ./cmd/devserver

test: tools fmt-check vet lint-template gotest

tools:
	@./scripts/ensure-tools.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# -p 2 matches the two cores; each test package starts its own Postgres
# (and moto where it needs S3).
gotest:
	$(GO) test -race -p 2 -timeout 25m $(PKGS)

clean:
	rm -rf bin .aws-sam

include lambda.mk
