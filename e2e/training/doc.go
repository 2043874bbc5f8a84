// Package training is the TrainingJob suite of the platform's e2e tests
// (issue 15, suite 1), run by make e2e on the kind cluster of make
// quickstart. Every test runs once per training backend
// ($ML_PLATFORM_E2E_TRAINING_BACKENDS, default "native"; "kubeflow" needs the umbrella's kubeflow.enabled): the PyTorch DDP
// sample succeeds; a worker pod deleted mid-training starts the next run,
// which resumes from the last checkpoint; a user error (exit 1) fails the
// job without a retry, with the reason in status; the TTL removes a
// finished job and its pods.
//
// Frameworks (issue 27): XGBoost trains one model on three pods through its
// own rabit tracker (images/xgboost), each pod's termination message giving
// its XGBoost rank, the allreduce, the rounds, the training error and the
// model's hash; TensorFlow, Paddle and JAX (native only), which are not
// packaged offline, are proven by testdata/contract.py, which reads their
// environment as the frameworks document it and connects every rank to
// every other at the addresses and ports given (for JAX, every process
// registers at process 0's coordinator first). MPI (images/mpi) runs a real
// mpi4py allreduce launched by mpirun over the operator's SSH; a failing
// launcher and a worker the quota refuses end in Failed with the
// launcher's words. Rank 0 of the XGBoost, MPI and contract runs reports
// through the progress helper, and the tests read it in status.progress.
package training
