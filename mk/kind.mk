# The air-gapped kind platform: a Kubernetes cluster in Docker built entirely
# from Go modules and Debian packages (hack/kind/README.md).

KIND_HACK := hack/kind

##@ Kind platform

.PHONY: kind-docker
kind-docker: ## Make sure a Docker engine runs: installs Debian's docker.io and starts it, with the runc wrapper where the capability bounding set is incomplete.
	$(KIND_HACK)/docker.sh ensure

.PHONY: kind-test
kind-test: ## Run the unit tests of the kind platform's own programs (runc wrapper, node tools).
	cd $(KIND_HACK)/runc-wrapper && GOWORK=off go test -count=1 ./...
