##@ Release: charts and the mlp archives

# Where `make charts-push` pushes the chart archives: an OCI reference,
# e.g. oci://ghcr.io/ml-platform/charts. HELM_PUSH_FLAGS adds flags to
# helm push (e.g. --plain-http).
CHART_REGISTRY ?=

.PHONY: charts-package
charts-package: ## Package every installable chart into bin/charts/NAME-VERSION.tgz (helm package; the version is Chart.yaml's).
	hack/charts.sh package

.PHONY: charts-push
charts-push: charts-package ## Push the chart archives to the OCI registry CHART_REGISTRY (helm push).
	@[[ -n "$(CHART_REGISTRY)" ]] || { echo "set CHART_REGISTRY=oci://REGISTRY/PATH" >&2; exit 1; }
	hack/charts.sh push $(CHART_REGISTRY)

.PHONY: test-charts-oci
test-charts-oci: ## Package the charts, push them to an OCI registry on loopback (built from Go modules) and pull them back.
	hack/charts-oci-test.sh

.PHONY: test-krew-mlp
test-krew-mlp: ## Build the mlp archives for two platforms and check them with krew's own manifest validator and krew install, offline.
	hack/krew-mlp-test.sh

.PHONY: release
release: charts-package krew-mlp ## Build every release artifact: bin/charts/*.tgz, and bin/krew/ (the mlp archives and their krew manifest).
