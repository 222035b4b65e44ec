# pendinguploads: `make run` starts the service locally, `make test` runs
# every test and check. See README.md.

GO ?= go
PKGS := ./...
# The Go client is a module of its own (client/go.mod; the server requires
# it through a replace): every Go check below runs in both modules.
CLIENT_MOD := client

.DEFAULT_GOAL := help

.PHONY: help run run-s3 deploy check-sam test slowchecks check-tools tools lint-tools vet fmt-check tidy-check staticcheck cross-build gotest gotest-client gotest-server bench fuzz load scale clean

help:
	@echo "make run     start the whole service locally (port 8080; its own Postgres unless DATABASE_URL is set)"
	@echo "make run-s3  the same in the production shape: large files in a local S3 (moto) it starts, with the bucket made"
	@echo "make test    every test and check, in both Go modules (server, client/): go mod tidy -diff, goimports, go vet, staticcheck, cfn-lint, go test -race"
	@echo "make tools   install the Debian packages the tests need (make test does too, naming them first; INSTALL=0 declines)"
	@echo "make build   every Lambda function as Lambda builds it, into bin/<fn>/bootstrap"
	@echo "make deploy  sam build and sam deploy, once sam --version is new enough (DEPLOY_FLAGS=--guided the first time)"
	@echo "make bench   benchmarks with their baselines and a report"
	@echo "make fuzz    each fuzz target for FUZZTIME (default 30s)"
	@echo "make load    a bounded load run against a local dev server"
	@echo "make scale   issue 41's ratios at 10k/1M/5M rows, with EXPLAIN (not in make test)"

# run: the dev server, built into bin/ and exec'd, not go run: go run
# exits 1 when Ctrl-C reaches it, whatever the server's own exit, and make
# ended a clean stop with "Error 1". exec: the shell gives way to the
# server, so Ctrl-C ends it as it ends make, and a clean stop prints
# nothing more.
DEVSERVER := bin/devserver
run:
	$(GO) build -o $(DEVSERVER) ./cmd/devserver && exec $(DEVSERVER)

# run-s3: make run with LOCAL_S3=1: a moto_server on a loopback port, the
# bucket made as template.yaml makes it; Ctrl-C stops it with the rest.
run-s3:
	$(GO) build -o $(DEVSERVER) ./cmd/devserver && exec env LOCAL_S3=1 $(DEVSERVER)

# deploy: scripts/deploy.sh checks that SAM CLI can deploy this template
# (1.161.1 or later: an older sam package leaves openapi.yaml local, and
# CloudFormation refuses the stack), then runs sam build and sam deploy
# with DEPLOY_FLAGS (docs/deploy.md, "Deploy with SAM"). check-sam checks
# the version alone.
DEPLOY_FLAGS ?=
deploy:
	./scripts/deploy.sh $(DEPLOY_FLAGS)

check-sam:
	@SAM_CHECK_ONLY=1 ./scripts/deploy.sh

# test: the quick checks first, one after the other (a typo fails in
# seconds); then go test -race of the server module and, beside it, the
# slower checks (slowchecks: staticcheck, the cross-builds, cfn-lint and
# the client module's tests). The test run spends much of its time
# waiting (on its servers, deadlines, the browser), and the checks fill
# it: they run niced, on the CPU the tests leave idle, so that a test's
# deadlines see no more load than the tests' own. Their output is held
# and shown whole after go test's, with their exit status; a failure of
# either fails make test.
test: check-tools lint-tools tidy-check fmt-check vet
	@log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	( nice -n 10 $(MAKE) -k --no-print-directory slowchecks >"$$log" 2>&1; echo "slowchecks exit $$?" >>"$$log" ) & checks=$$!; \
	$(MAKE) --no-print-directory gotest-server; tests=$$?; \
	wait $$checks; echo "=== slowchecks (staticcheck, cross-build, lint-template, gotest-client), run beside go test:"; cat "$$log"; \
	[ $$tests -eq 0 ] && tail -n 1 "$$log" | grep -qx 'slowchecks exit 0'

slowchecks: staticcheck cross-build lint-template gotest-client

# check-tools: the machine has what the tests run on; a missing Debian
# package is installed, named first, so that make test works on a fresh
# machine; INSTALL=0 make test stops with the apt-get line instead.
check-tools:
	@./scripts/ensure-tools.sh

tools:
	@INSTALL=1 ./scripts/ensure-tools.sh

# The Go linters, pinned, built into .tools/bin (not the module's
# dependencies: nothing of them reaches a function's binary).
TOOLS := $(CURDIR)/.tools/bin
GOIMPORTS_VERSION := v0.41.0
STATICCHECK_VERSION := v0.8.2
LOCAL_IMPORTS := github.com/pendinguploads/pendinguploads

lint-tools:
	@GOBIN=$(TOOLS) $(GO) install golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION)
	@GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

tidy-check:
	@for m in . $(CLIENT_MOD); do \
	  (cd $$m && $(GO) mod tidy -diff >/dev/null 2>&1) || { echo "$$m/go.mod, go.sum are not tidy; go mod tidy would change:"; (cd $$m && $(GO) mod tidy -diff); exit 1; }; \
	done

# goimports: gofmt, and imports in three groups (standard, others, ours).
fmt-check:
	@out=$$($(TOOLS)/goimports -l -local $(LOCAL_IMPORTS) $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*')); \
	if [ -n "$$out" ]; then echo "goimports -local $(LOCAL_IMPORTS) would change:"; echo "$$out"; exit 1; fi

staticcheck:
	$(TOOLS)/staticcheck $(PKGS)
	cd $(CLIENT_MOD) && $(TOOLS)/staticcheck ./...

vet:
	$(GO) vet $(PKGS)
	cd $(CLIENT_MOD) && $(GO) vet ./...

# cross-build: the client and pendingctl run on workspaces' machines, Windows
# and macOS included (the pull lock is gofrs/flock: flock or LockFileEx), so
# both modules compile there (the client's own module vetted for both
# systems too): every package on Windows (the main packages
# type-checked by vet, as the client and pendingctl are), every package and
# its tests on macOS (vet: the test harnesses' process handling is per OS;
# loadgen is Linux-only), and pendingctl, the binary that ships there, is
# linked for both. Nothing else is linked: go build ./... would link every
# main package (13 for each system) only to throw the binaries away, the
# one step of this target the build cache cannot skip.
WINDOWS_LIBS = $$(GOOS=windows GOARCH=amd64 $(GO) list -e -f '{{if and .GoFiles (ne .Name "main")}}{{.ImportPath}}{{end}}' ./...)
WINDOWS_MAINS = $$(GOOS=windows GOARCH=amd64 $(GO) list -e -f '{{if and .GoFiles (eq .Name "main")}}{{.ImportPath}}{{end}}' ./...)
cross-build:
	GOOS=windows GOARCH=amd64 $(GO) build $(WINDOWS_LIBS)
	GOOS=windows GOARCH=amd64 $(GO) vet $(WINDOWS_MAINS)
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/pendingctl
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/pendingctl
	cd $(CLIENT_MOD) && GOOS=windows GOARCH=amd64 $(GO) vet ./...
	cd $(CLIENT_MOD) && GOOS=darwin GOARCH=arm64 $(GO) vet ./...

# gotest: both modules' tests with -race. Each server test package
# starts its own Postgres (and moto where it needs S3). -count=1: results
# that depend on those servers are never taken from the cache. The client
# module's own tests need no server (its tests against the whole service
# are internal/clienttest's, in the server module).
#
# GORACE atexit_sleep_ms=0: by default a binary built with -race sleeps a
# second before it exits, so that goroutines still running can report a
# race; every test binary paid it (39 in the server module: 39 s of the
# slots, some 20 s of wall time). A race during a test fails that test
# (testing checks the detector after each one) and any later one still
# fails the binary; what the second caught, and no longer does, is a race
# between goroutines that outlive every test, in the last second before
# exit. GORACE given to make is kept after it (a later option wins).
# https://go.dev/doc/articles/race_detector#Options
#
# -p 3 on two cores: a test package spends much of its time waiting (on
# its servers, deadlines, subprocesses, the browser). Measured on every
# package but the browser's and pendingctl's, quiet: -p 2 took 176 s and
# used 1.06 cores, -p 3 128 s and 1.57 cores, each package about as long
# as before. With both cores kept busy by two other loops, every package
# but the browser's at -p 3, slowchecks beside: 190 s, green.
# GOTEST_P=2 make test for the old pace.
#
# SLOW_FIRST: go test starts packages in the order given (each once), so
# the longest start first rather than last; ./... adds every other.
RACE_ENV := GORACE="atexit_sleep_ms=0 $(GORACE)"
GOTEST_P ?= 3
SLOW_FIRST := ./clients/js/browsertest ./cmd/pendingctl ./internal/httpapi ./cmd/devserver
gotest: gotest-client gotest-server
gotest-client:
	cd $(CLIENT_MOD) && $(RACE_ENV) $(GO) test -race -count=1 -timeout 5m ./...
gotest-server:
	$(RACE_ENV) $(GO) test -race -count=1 -p $(GOTEST_P) -timeout 25m $(if $(filter ./...,$(PKGS)),$(SLOW_FIRST)) $(PKGS)

# bench: every benchmark with its baseline from the same run (see
# internal/tools/benchreport), then the report. BENCHFLAGS passes its flags, e.g.
# BENCHFLAGS='-count 1'.
bench:
	$(GO) run ./internal/tools/benchreport $(BENCHFLAGS)

# fuzz: each target for FUZZTIME. A duration-bound run can fail at the
# deadline with a bare "context deadline exceeded" and no crasher
# (golang/go#75804, unfixed in Go 1.26): that one case is reported as a
# flake, not a failure. A written crasher, or any other failure, fails.
# FUZZTIME may also be a count (FUZZTIME=200000x), which has no deadline.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./internal/sanitize:FuzzFilename ./internal/sanitize:FuzzMimetype \
	./internal/sanitize:FuzzContentDisposition ./internal/httpapi:FuzzUploadHandler \
	./internal/pendinguploads:FuzzCursor
fuzz:
	@fail=0; summary=""; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; dir=$$pkg/testdata/fuzz/$$name; \
	  before=$$(ls $$dir 2>/dev/null | wc -l); log=$$(mktemp); \
	  echo "=== $$name ($$pkg), -fuzztime $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1; rc=$$?; \
	  cat $$log; after=$$(ls $$dir 2>/dev/null | wc -l); \
	  last=$$(grep '^fuzz: elapsed' $$log | tail -1 | sed 's/^fuzz: //'); \
	  if [ $$rc -eq 0 ]; then verdict=ok; \
	  elif [ $$after -eq $$before ] && grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
	    verdict="flake at the deadline (golang/go#75804), no crasher"; \
	  else verdict=FAIL; fail=1; fi; \
	  summary="$$summary$$(printf '  %-24s %-8s %s\n' $$name "$$verdict" "$$last")\n"; rm -f $$log; \
	done; printf "\nfuzz summary (-fuzztime $(FUZZTIME), $$(nproc) cores):\n$$summary"; exit $$fail

# load: a bounded load run against a dev server of its own (see
# internal/tools/loadgen); LOADFLAGS passes its flags, e.g. LOADFLAGS='-workspaces 16'.
load:
	$(GO) run ./internal/tools/loadgen $(LOADFLAGS)

# scale: issue 41's measurements at 10k, 1M and 5M rows on a throwaway
# Postgres of its own, each ratio against its goal with EXPLAIN (ANALYZE,
# BUFFERS) of every statement on the paths (see internal/tools/scale; about
# 10 minutes on two cores); not in make test. SCALEFLAGS passes its flags,
# e.g. SCALEFLAGS='-sizes 10k,100k -sweep-small 10k -sweep-large 100k'.
scale:
	$(GO) run ./internal/tools/scale $(SCALEFLAGS)

clean:
	rm -rf bin .aws-sam

include lambda.mk
