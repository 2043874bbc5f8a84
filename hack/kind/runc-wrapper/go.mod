// The runc wrapper is a static program (standard library only; go-cmp in tests) that Docker (on the
// host) and containerd (inside kind nodes) run instead of runc where the
// capability bounding set is incomplete. It is its own module, outside go.work,
// so it builds in seconds with the standard library alone.
module github.com/ml-platform/ml-platform/hack/kind/runc-wrapper

go 1.25.0

require github.com/google/go-cmp v0.7.0
