// Package images smoke-tests the platform's own images (hack/images,
// `make images`) on the offline kind cluster: a two-process DDP training
// that resumes from its checkpoint, Jupyter under the restricted Pod
// Security Standard, and Redis and PostgreSQL that keep their data on a
// PersistentVolumeClaim across a restart. Every pod uses a preloaded image
// (imagePullPolicy Never); `make e2e-smoke-images` loads them first.
package images
