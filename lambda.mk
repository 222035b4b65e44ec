# lambda.mk builds the Lambda functions; the Makefile includes it.
#
# `sam build` runs `make build-<LogicalId>` in the repository root (every
# function in template.yaml has CodeUri "." and Metadata BuildMethod
# makefile) with ARTIFACTS_DIR set; the bootstrap lands there. `make build`
# builds every function into bin/<dir>/bootstrap.
#
# LAMBDA_FUNCTIONS pairs each template logical ID with its directory under
# functions/ (the ID is the directory in title case). internal/deploytest
# holds this list, template.yaml and functions/ to each other.
# Included before or after the Makefile's own targets, it leaves the
# default goal alone.
lambda_default_goal := $(.DEFAULT_GOAL)

LAMBDA_FUNCTIONS := Upload:upload Presign:presign List:list Content:content Ack:ack Sweep:sweep Migrate:migrate Admin:admin Pushauth:pushauth Iotendpoint:iotendpoint Scanresult:scanresult Pushrelay:pushrelay Bootstrap:bootstrap

LAMBDA_GOARCH ?= arm64
LAMBDA_GO ?= go
LAMBDA_BUILD = CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_GOARCH) $(LAMBDA_GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'

lambda_id = $(word 1,$(subst :, ,$(1)))
lambda_dir = $(word 2,$(subst :, ,$(1)))

# lambda_function defines build-<LogicalId> for one function. Without
# ARTIFACTS_DIR (plain make) the binary goes to bin/<dir>/bootstrap.
define lambda_function
.PHONY: build-$(1)
build-$(1):
	$$(LAMBDA_BUILD) -o $$(or $$(ARTIFACTS_DIR),bin/$(2))/bootstrap ./functions/$(2)
endef
$(foreach f,$(LAMBDA_FUNCTIONS),$(eval $(call lambda_function,$(call lambda_id,$(f)),$(call lambda_dir,$(f)))))

# build has no recipe of its own, so the Makefile may add prerequisites to
# it. ARTIFACTS_DIR is cleared for it: one directory per binary.
.PHONY: build build-lambdas lint-template
build: build-lambdas
build-lambdas: ARTIFACTS_DIR :=
build-lambdas: $(foreach f,$(LAMBDA_FUNCTIONS),build-$(call lambda_id,$(f)))

# cfn-lint exits non-zero on errors and on warnings; keep it that way.
lint-template:
	cfn-lint template.yaml

.DEFAULT_GOAL := $(lambda_default_goal)
