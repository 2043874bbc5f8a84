# The end-to-end suites of e2e/ on the kind platform, and the nightly
# pipeline that runs them from a fresh clone (issue 15; hack/e2e/README.md).

E2E_HACK := hack/e2e
# E2E_ARTIFACTS receives the JUnit report, the test output and, after every
# run, the cluster's state (pod and operator logs, events, object YAML).
E2E_ARTIFACTS ?= $(CURDIR)/_artifacts
# E2E_SUITES restricts make e2e to some suites (packages under e2e/, in the
# order given); uninstall runs last on purpose, as it removes the release.
E2E_SUITES ?= cluster images quickstart notebooks featurestores training ha uninstall
E2E_TIMEOUT ?= 90m
export E2E_ARTIFACTS E2E_SUITES E2E_TIMEOUT

##@ End to end

.PHONY: e2e
e2e: quickstart ## Run every e2e suite on the kind cluster (created and installed when needed); report and artifacts in $(E2E_ARTIFACTS).
	$(E2E_HACK)/run.sh

.PHONY: e2e-collect
e2e-collect: ## Save the kind cluster's state (logs, events, object YAML; never Secret data) under $(E2E_ARTIFACTS)/cluster.
	$(E2E_HACK)/collect.sh "$(E2E_ARTIFACTS)/cluster"

.PHONY: nightly
nightly: ## What the nightly pipeline does: build offline, create the cluster, install, run every suite, collect artifacts, delete the cluster.
	$(E2E_HACK)/nightly.sh
