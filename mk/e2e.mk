# The end-to-end suites of e2e/ on the kind platform, and the nightly
# pipeline that runs them from a fresh clone (issue 15; hack/e2e/README.md).

E2E_HACK := hack/e2e
# E2E_ARTIFACTS receives the JUnit report, the test output and, after every
# run, the cluster's state (pod and operator logs, events, object YAML).
E2E_ARTIFACTS ?= $(CURDIR)/_artifacts
# E2E_SUITES restricts make e2e to some suites (packages under e2e/, in the
# order given); uninstall runs last on purpose, as it removes the release.
E2E_SUITES ?= cluster images quickstart notebooks network featurestores training kueue cli ha upgrade uninstall
E2E_TIMEOUT ?= 90m
# E2E_TRAINING_BACKENDS: the backends the training and cli suites run every
# test on; naming kubeflow makes the quickstart install the Kubeflow
# training-operator (QUICKSTART_KUBEFLOW=true).
E2E_TRAINING_BACKENDS ?= native,kubeflow
# UPGRADE_FROM is the revision the upgrade suite starts from (default: the
# newest tag before HEAD, else main~1; hack/e2e/upgrade-from.sh).
UPGRADE_FROM ?=
export E2E_ARTIFACTS E2E_SUITES E2E_TIMEOUT E2E_TRAINING_BACKENDS UPGRADE_FROM

##@ End to end

.PHONY: e2e
e2e: export QUICKSTART_KUBEFLOW = $(if $(findstring kubeflow,$(E2E_TRAINING_BACKENDS)),true,false)
# The kueue suite needs Kueue installed (the umbrella's kueue.enabled).
e2e: export QUICKSTART_KUEUE = $(if $(filter kueue,$(E2E_SUITES)),true,false)
e2e: quickstart ## Run every e2e suite on the kind cluster (created and installed when needed); report and artifacts in $(E2E_ARTIFACTS).
	$(E2E_HACK)/run.sh

.PHONY: e2e-upgrade
e2e-upgrade: quickstart ## Install the platform of $(UPGRADE_FROM) (built offline), create objects on it and upgrade to the working tree (e2e/upgrade).
	$(E2E_HACK)/upgrade-from.sh

.PHONY: e2e-ha
e2e-ha: quickstart ## Delete the operators' leaders (two replicas each) during a burst of TrainingJobs and Notebooks (e2e/ha).
	cd e2e && ML_PLATFORM_E2E=1 KUBECONFIG=$(KIND_KUBECONFIG) go test -count=1 -timeout 60m -v ./ha/

.PHONY: e2e-collect
e2e-collect: ## Save the kind cluster's state (logs, events, object YAML; never Secret data) under $(E2E_ARTIFACTS)/cluster.
	cd e2e && KUBECONFIG=$(KIND_KUBECONFIG) go run ./cmd/collect "$(E2E_ARTIFACTS)/cluster"

.PHONY: nightly
nightly: ## What the nightly pipeline does: build offline, create the cluster, install, run every suite, collect artifacts, delete the cluster.
	$(E2E_HACK)/nightly.sh
