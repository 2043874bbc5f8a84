# The air-gapped kind platform: a Kubernetes cluster in Docker built entirely
# from Go modules and Debian packages (hack/kind/README.md). Everything built
# is cached under $(KIND_CACHE), keyed by content.

KIND_HACK := hack/kind
KIND_CLUSTER_NAME ?= ml-platform
KIND_KUBECONFIG ?= $(CURDIR)/bin/kind-$(KIND_CLUSTER_NAME).kubeconfig
KIND_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ml-platform/kind
KIND_WORKERS ?= 0
# 1: kind-up deploys the NetworkPolicy engine (kube-router's firewall); 0: policies are accepted and not enforced.
KIND_NETWORK_POLICY ?= 1
export KIND_CLUSTER_NAME KIND_KUBECONFIG KIND_CACHE KIND_WORKERS KIND_NETWORK_POLICY

##@ Kind platform

.PHONY: kind-up
kind-up: ## Create the kind cluster (KIND_WORKERS=N adds workers, KIND_NETWORK_POLICY=0 leaves NetworkPolicy unenforced); Docker, node image and images are built locally when needed, cached.
	$(KIND_HACK)/up.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster and leave no container, network or dockerd of it behind (caches stay).
	$(KIND_HACK)/down.sh

.PHONY: kind-node-image
kind-node-image: kind-docker ## Build the kind node image with every image preloaded (cached by content).
	@bin=$$($(KIND_HACK)/binaries.sh) && rootfs=$$($(KIND_HACK)/rootfs.sh) && \
		images=$$($(KIND_HACK)/images.sh $$bin $$rootfs) && $(KIND_HACK)/node-image.sh $$bin $$rootfs $$images

.PHONY: kind-docker
kind-docker: ## Make sure a Docker engine runs: Debian's docker.io, with the runc wrapper where the capability bounding set is incomplete.
	$(KIND_HACK)/docker.sh ensure

.PHONY: kind-binaries
kind-binaries: ## Build the Kubernetes, kind, etcd, CoreDNS, local-path and kube-router binaries from Go modules (cached).
	$(KIND_HACK)/binaries.sh

.PHONY: kind-test
kind-test: ## Run the unit tests of the kind platform's own programs (runc wrapper, mlp-cni, iptables-wrapper).
	cd $(KIND_HACK)/runc-wrapper && GOWORK=off go test -count=1 ./...
	cd tools/kind && GOWORK=off go test -count=1 ./cmd/...

.PHONY: kind-clean-cache
kind-clean-cache: kind-down ## Delete the kind platform's caches (binaries, root filesystem, images) and its node images.
	@if docker info >/dev/null 2>&1; then for i in $$(docker images -q ml-platform/kind-node); do docker rmi -f $$i >/dev/null; done; fi
	rm -rf $(KIND_CACHE)

.PHONY: e2e-smoke-cluster
e2e-smoke-cluster: ## Check the kind cluster's infrastructure: nodes, system pods, DNS, Services, storage, preloaded images.
	cd e2e && ML_PLATFORM_E2E=1 KUBECONFIG=$(KIND_KUBECONFIG) go test -count=1 -timeout 10m -v ./cluster/...
