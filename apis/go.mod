module github.com/ml-platform/ml-platform/apis

go 1.25.0

require (
	k8s.io/api v0.34.3
	k8s.io/apimachinery v0.34.3
)
