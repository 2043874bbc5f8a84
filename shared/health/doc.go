// Package health computes an ml-platform object's health as the tools that
// deploy it do: kstatus (sigs.k8s.io/cli-utils, used by Helm 4 --wait and
// Flux) and Argo CD, by running the Lua health checks shipped in
// deploy/argocd, so that tests can check both against every state an
// operator produces.
package health
