// Package cli is the mlp CLI suite of the platform's e2e tests (issue 13's
// kind acceptance), run by make e2e on the kind cluster of make quickstart
// with an mlp built from this tree: `mlp train submit` follows the DDP
// sample to its end and exits 0; `mlp train logs -f` follows both ranks;
// `mlp notebook open` prints a URL on which Jupyter's API answers with the
// token and refuses a wrong one; `mlp featurestore config` writes a 0600
// file with which a client pod in the cluster connects to the store.
package cli
