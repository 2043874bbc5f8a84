// Package quickstart tests `make quickstart`: the ml-platform umbrella chart
// with the values of the offline kind cluster, and the samples of
// deploy/samples. Its render and sample tests need no cluster and run in make
// test; the rest runs against the installed quickstart (make quickstart, then
// make e2e-quickstart).
package quickstart
