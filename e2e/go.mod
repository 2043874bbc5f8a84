module github.com/ml-platform/ml-platform/e2e

go 1.25.0
