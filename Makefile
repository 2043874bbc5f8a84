# ml-platform: run `make help` for the targets.

SHELL := /usr/bin/env bash -o errexit -o pipefail -o nounset
.DEFAULT_GOAL := help

# Every Go module of the workspace, as go.work lists them.
MODULES := $(patsubst $(CURDIR)/%,%,$(shell go list -m -f '{{.Dir}}'))
# Operators are the modules under operators/.
OPERATORS := $(patsubst operators/%,%,$(filter operators/%,$(MODULES)))

# Kubernetes control-plane binaries built from tools/k8s, cached per version
# outside the clone so fresh clones on the same machine reuse them.
K8S_VERSION := $(shell cd tools/k8s && GOWORK=off go list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_BIN_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ml-platform/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS := $(K8S_BIN_DIR)

GO_TEST_FLAGS ?= -count=1 -timeout=20m
# test-race's flags: -race costs several times the CPU and memory of a plain
# run, hence the longer timeout; -shuffle=on prints the seed of each package's
# order, and GO_RACE_FLAGS="-count=1 -race -shuffle=SEED" replays it.
GO_RACE_FLAGS ?= -count=1 -timeout=60m -race -shuffle=on

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z0-9_%-]+:.*?##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy code, CRDs and RBAC from the Go types and markers; copy Kueue's chart from its module into the umbrella and the local subcharts into their parents.
	controller_gen=$$(hack/tool.sh controller-gen); \
	$$controller_gen object paths=./apis/... paths=./shared/internal/sample/...; \
	rm -f shared/internal/sample/crd/*.yaml; \
	$$controller_gen crd paths=./shared/internal/sample/... output:crd:artifacts:config=shared/internal/sample/crd; \
	for op in $(OPERATORS); do hack/generate-operator.sh "$$controller_gen" $$op; done; \
	hack/kueue-chart.sh; \
	hack/subcharts.sh

.PHONY: fmt
fmt: ## Format every module's Go code.
	golangci_lint=$$(hack/tool.sh golangci-lint); $$golangci_lint fmt --config .golangci.yml $(addsuffix /...,$(addprefix ./,$(MODULES)))

.PHONY: verify
verify: generate verify-modules ## Regenerate everything and fail on any difference; check module consistency.
	@if [[ -n "$$(git status --porcelain --untracked-files=all -- apis shared operators charts deploy)" ]]; then \
		git status --short -- apis shared operators charts deploy; git --no-pager diff --stat; \
		echo "generated files are out of date: run 'make generate' and commit the result" >&2; exit 1; fi
	@cd shared && go run ./internal/k8sversion "$(K8S_VERSION)"

.PHONY: verify-modules
verify-modules: ## Build and vet every module in the workspace and alone (GOWORK=off); fail on version drift.
	hack/verify-modules.sh

.PHONY: lint
lint: ## Run golangci-lint on every module.
	hack/lint.sh

##@ Test

.PHONY: test
test: k8s-bin test-deps test-python test-hack ## Run unit and integration tests of every module (real kube-apiserver, etcd, kube-controller-manager), of the Python helper and of the image build scripts.
	@# Built here, outside the tests' timeout (a cold build takes minutes); if
	@# it cannot be built, the Kueue tests say so and skip.
	@operators/trainingjob/hack/kueue-bin.sh >/dev/null || echo "make test: Kueue cannot be built; its tests will skip" >&2
	@for m in $(MODULES); do \
		echo "== go test $$m"; \
		(cd $$m && go test $(GO_TEST_FLAGS) ./...) || exit 1; \
	done

.PHONY: test-race
test-race: k8s-bin test-deps ## Run every module's tests with the race detector, in random order (-race -shuffle=on); the nightly runs it.
	@failed=""; for m in $(MODULES); do \
		echo "== go test -race -shuffle=on $$m"; \
		(cd $$m && go test $(GO_RACE_FLAGS) ./...) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-race failed in:$$failed" >&2; exit 1; fi

.PHONY: test-python
test-python: ## Run the tests of the Python progress helper (python/mlplatform-progress) with Debian's python3, offline.
	python/mlplatform-progress/hack/test.sh

.PHONY: test-hack
test-hack: ## Test the image build scripts (hack/images, hack/kind) with stub docker, debootstrap and go: recipe file ownership, concurrent sessions on one cache and engine; builds nothing.
	hack/images-test.sh

.PHONY: progress-wheel
progress-wheel: ## Build the Python progress helper's wheel into bin/, offline (python/mlplatform-progress/README.md).
	python/mlplatform-progress/hack/wheel.sh

.PHONY: test-deps
test-deps: ## Install what the operators' tests need from Debian (PostgreSQL, Redis, Jupyter); idempotent.
	@for op in $(OPERATORS); do if [[ -x operators/$$op/hack/test-deps.sh ]]; then operators/$$op/hack/test-deps.sh || exit 1; fi; done

.PHONY: kueue-bin
kueue-bin: ## Build the Kueue controller manager pinned in tools/kueue (cached per version); the Kueue tests build it when missing.
	operators/trainingjob/hack/kueue-bin.sh

.PHONY: k8s-bin
k8s-bin: ## Build kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kubectl from Go modules (cached per version).
	hack/k8s-bin.sh $(K8S_BIN_DIR)

##@ Operators (one set of targets per module under operators/)

.PHONY: build
build: $(addprefix build-,$(OPERATORS)) ## Build every operator binary into bin/.

build-%: ## Build one operator binary into bin/, e.g. build-trainingjob.
	cd operators/$* && CGO_ENABLED=0 go build -trimpath -o ../../bin/$*-operator ./cmd

test-%: k8s-bin ## Run one operator's tests, e.g. test-trainingjob.
	cd operators/$* && go test $(GO_TEST_FLAGS) ./...

bench-%: k8s-bin test-deps ## Run one operator's benchmark and print its figures, e.g. bench-trainingjob.
	cd operators/$* && go test -count=1 -timeout=60m -run '^$$' -bench . -benchtime=1x -v ./bench/

# BENCH_ARGS tunes bench-backends, e.g. BENCH_ARGS="-jobs=50 -saturation-jobs=0 -nodes=50";
# operators/trainingjob/bench/backends/README.md lists every flag.
BENCH_ARGS ?=

.PHONY: bench-backends
bench-backends: k8s-bin ## Compare the TrainingJob backends (native, Kubeflow) on a real control plane with kwok nodes (BENCH_ARGS tunes it).
	cd operators/trainingjob && go test -count=1 -timeout=90m -run '^$$' -bench '^BenchmarkBackends$$' -benchtime=1x -v ./bench/backends/ -args $(BENCH_ARGS)

.PHONY: bench-scale
bench-scale: k8s-bin ## Fill a control plane with 20 000 TrainingJobs and measure the operator's restart, re-sync, memory and leader handovers (BENCH_ARGS tunes it).
	cd operators/trainingjob && go test -count=1 -timeout=90m -run '^$$' -bench '^BenchmarkScale$$' -benchtime=1x -v ./bench/backends/ -args $(BENCH_ARGS)

run-%: ## Run one operator against the current kubeconfig, without leader election or metrics TLS.
	cd operators/$* && go run ./cmd --leader-elect=false --metrics-secure=false --metrics-bind-address=:8080 --health-probe-bind-address=:8081

##@ CLI

# The version mlp reports; a release sets it (make build-mlp MLP_VERSION=v0.2.0).
MLP_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: build-mlp
build-mlp: ## Build the mlp CLI into bin/mlp, and bin/kubectl-mlp for `kubectl mlp` (tools/mlp/README.md).
	cd tools/mlp && CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util.version=$(MLP_VERSION)" \
		-o ../../bin/mlp ./cmd/mlp
	ln -sf mlp bin/kubectl-mlp
	install -m 0755 tools/mlp/kubectl_complete-mlp bin/kubectl_complete-mlp

.PHONY: krew-mlp
krew-mlp: ## Build mlp release archives and the krew manifest into bin/krew (MLP_VERSION, MLP_RELEASE_URL).
	hack/krew-mlp.sh $(MLP_VERSION) $(or $(MLP_RELEASE_URL),https://github.com/ml-platform/ml-platform/releases/download/$(MLP_VERSION))

# Larger areas (the kind platform, images) keep their targets in mk/*.mk.
-include mk/*.mk
