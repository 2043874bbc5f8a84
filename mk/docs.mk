##@ Docs

.PHONY: docs
docs: ## Redraw docs/architecture.md's picture from the charts and CRDs (its test fails while it is stale).
	cd tools/mlp && go test -count=1 ./internal/docs -run '^TestArchitectureIsCurrent$$' -update
