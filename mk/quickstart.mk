# The quickstart: every operator of the platform, installed through the
# ml-platform umbrella chart on the offline kind cluster, with the samples of
# deploy/samples to try (hack/quickstart/quickstart.sh).
QUICKSTART_HACK := hack/quickstart

##@ Quickstart
.PHONY: quickstart
quickstart: kind-up load-images build-mlp ## Create the kind cluster, load the images, build bin/mlp and install charts/ml-platform with values-kind.yaml; prints what to try.
	$(QUICKSTART_HACK)/quickstart.sh up

.PHONY: quickstart-down
quickstart-down: ## Delete the quickstart's samples namespace and the ml-platform release (the cluster stays: make kind-down removes it).
	$(QUICKSTART_HACK)/quickstart.sh down

.PHONY: e2e-quickstart
e2e-quickstart: ## Test the installed quickstart: operators Available, the samples of deploy/samples Ready or Succeeded.
	cd e2e && ML_PLATFORM_E2E=1 KUBECONFIG=$(KIND_KUBECONFIG) go test -count=1 -timeout 30m -v ./quickstart/...
