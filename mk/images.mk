# The platform's own images, built offline from this repository, Go modules
# and Debian packages, cached by content under $(IMAGES_CACHE) (issue 8;
# hack/images/README.md).

IMAGES_HACK := hack/images
IMAGES_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ml-platform/images
# IMAGES restricts `make images` and `make load-images` to some images
# (names from `hack/images/build.sh --list`); empty builds every image.
IMAGES ?=
export IMAGES_CACHE

##@ Images

.PHONY: images
images: kind-docker ## Build every platform image (operators, training-operator, Redis, PostgreSQL, Jupyter, PyTorch, XGBoost); cached by content.
	$(IMAGES_HACK)/build.sh $(IMAGES)

.PHONY: load-images
load-images: kind-docker ## Build (cached) and load the platform images into the kind cluster's nodes.
	@set=$$($(IMAGES_HACK)/build.sh $(IMAGES)) && $(IMAGES_HACK)/load.sh $$set

.PHONY: image-%
image-%: kind-docker ## Build one operator's image, e.g. image-notebook (cached by content).
	$(IMAGES_HACK)/build.sh operator-$*

.PHONY: e2e-smoke-images
e2e-smoke-images: load-images ## Smoke-test the platform images on the kind cluster (DDP training, Jupyter, Redis, PostgreSQL).
	cd e2e && ML_PLATFORM_E2E=1 KUBECONFIG=$(KIND_KUBECONFIG) go test -count=1 -timeout 20m -v ./images/...
