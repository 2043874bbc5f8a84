package main

import (
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	_ "github.com/ml-platform/ml-platform/shared/manager"
)

var _ = kubeflowv1.PyTorchJob{}

func main() {}
