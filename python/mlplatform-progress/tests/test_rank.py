"""Which process is rank 0, for every framework the platform runs.

Run: make test-python (Debian's /usr/bin/python3 -m unittest, no network).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from test_progress import SRC, Server, clean_environ, make_cert

sys.path.insert(0, SRC)

from mlplatform import progress  # noqa: E402


def tf_config(kind, index, chief=True, workers=2):
    cluster = {"worker": ["w%d:2222" % i for i in range(workers)]}
    if chief:
        cluster["chief"] = ["c0:2222"]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}, "environment": "cloud"})


class RankTest(unittest.TestCase):
    def test_every_frameworks_rank(self):
        cases = {
            "single process, no launcher": ({}, 0),
            "pytorch rank 0": ({"RANK": "0"}, 0),
            "pytorch rank 2": ({"RANK": "2"}, 2),
            "xgboost worker (RANK, both backends)": ({"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "m"}, 1),
            "xgboost DMLC_TASK_ID": ({"DMLC_TASK_ID": "0"}, 0),
            "jax process 0": ({"JAX_PROCESS_ID": "0", "JAX_NUM_PROCESSES": "2"}, 0),
            "jax process 1": ({"JAX_PROCESS_ID": "1", "JAX_NUM_PROCESSES": "2"}, 1),
            "paddle trainer 0": ({"PADDLE_TRAINER_ID": "0", "PADDLE_NNODES": "2"}, 0),
            "paddle trainer 1": ({"PADDLE_TRAINER_ID": "1", "PADDLE_NNODES": "2"}, 1),
            "open mpi world rank": ({"OMPI_COMM_WORLD_RANK": "3"}, 3),
            "pmix rank": ({"PMIX_RANK": "0"}, 0),
            "the mpi process rank wins over the pod's RANK": ({"RANK": "0", "OMPI_COMM_WORLD_RANK": "1"}, 1),
            "tensorflow chief": ({"TF_CONFIG": tf_config("chief", 0)}, 0),
            "tensorflow worker 0 with a chief": ({"TF_CONFIG": tf_config("worker", 0)}, 1),
            "tensorflow worker 1 with a chief": ({"TF_CONFIG": tf_config("worker", 1)}, 2),
            "tensorflow worker 0 without a chief": ({"TF_CONFIG": tf_config("worker", 0, chief=False)}, 0),
            "tensorflow worker 1 without a chief": ({"TF_CONFIG": tf_config("worker", 1, chief=False)}, 1),
            "tensorflow legacy master": ({"TF_CONFIG": json.dumps({"cluster": {"master": ["m:1"]}, "task": {"type": "master", "index": 0}})}, 0),
            "tensorflow parameter server": ({"TF_CONFIG": tf_config("ps", 0)}, None),
            "tensorflow evaluator": ({"TF_CONFIG": tf_config("evaluator", 0)}, None),
        }
        for name, (env, want) in cases.items():
            with self.subTest(name):
                self.assertEqual(progress.rank(env), want)
                self.assertEqual(progress.is_rank_zero(env), want == 0)

    def test_a_value_that_is_not_a_rank_is_refused(self):
        for env in ({"RANK": "zero"}, {"JAX_PROCESS_ID": "-1"}, {"TF_CONFIG": "{not json"}, {"TF_CONFIG": "[1]"}):
            with self.subTest(env=env):
                with self.assertRaises(ValueError):
                    progress.rank(env)


@unittest.skipIf(shutil.which("openssl") is None, "openssl is needed to make a test certificate")
class OnlyRankZeroReportsTest(unittest.TestCase):
    """The module-level report() sends from rank 0 only, whatever the framework.

    Before, a TensorFlow job's processes (no RANK) all reported, and every
    worker but the chief got 403 warnings from the operator.
    """

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        crt, key = make_cert(self.dir)
        with open(crt) as f:
            self.ca = f.read()
        self.token = os.path.join(self.dir, "token")
        with open(self.token, "w") as f:
            f.write("pod-token\n")
        self.server = Server(crt, key)
        self.addCleanup(self.server.close)

    def run_training(self, launcher_env):
        env = clean_environ()
        env.update(launcher_env)
        env.update(MLPLATFORM_PROGRESS_URL=self.server.url, MLPLATFORM_PROGRESS_TOKEN_FILE=self.token,
                   MLPLATFORM_PROGRESS_CA=self.ca)
        code = ("import sys; sys.path.insert(0, %r); from mlplatform import progress\n"
                "for step in range(1, 4): progress.report(step=step, total=3)\n"
                "assert progress.flush(10)\n") % SRC
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual((out.returncode, out.stderr), (0, ""))
        return len(self.server.requests)

    def test_tensorflow_chief_reports_and_workers_do_not(self):
        self.assertEqual(self.run_training({"TF_CONFIG": tf_config("worker", 0)}), 0, "worker 0 of a job with a chief reported")
        self.assertEqual(self.run_training({"TF_CONFIG": tf_config("worker", 1)}), 0, "worker 1 reported")
        self.assertEqual(self.run_training({"TF_CONFIG": tf_config("ps", 0)}), 0, "a parameter server reported")
        self.assertGreater(self.run_training({"TF_CONFIG": tf_config("chief", 0)}), 0, "the chief did not report")

    def test_tensorflow_without_a_chief_worker_0_reports(self):
        self.assertEqual(self.run_training({"TF_CONFIG": tf_config("worker", 1, chief=False)}), 0, "worker 1 reported")
        self.assertGreater(self.run_training({"TF_CONFIG": tf_config("worker", 0, chief=False)}), 0, "worker 0 did not report")

    def test_jax_mpi_xgboost_and_paddle_non_zero_ranks_stay_silent(self):
        for env in ({"JAX_PROCESS_ID": "1"}, {"OMPI_COMM_WORLD_RANK": "2"}, {"PMIX_RANK": "1"}, {"RANK": "1"}, {"DMLC_TASK_ID": "1"},
                    {"PADDLE_TRAINER_ID": "1"}):
            with self.subTest(env=env):
                self.assertEqual(self.run_training(env), 0)
        self.assertGreater(self.run_training({"JAX_PROCESS_ID": "0"}), 0, "JAX process 0 did not report")

    def test_a_bad_rank_disables_reporting_with_one_warning(self):
        env = clean_environ()
        env.update(MLPLATFORM_PROGRESS_URL=self.server.url, MLPLATFORM_PROGRESS_TOKEN_FILE=self.token, RANK="x")
        code = ("import sys; sys.path.insert(0, %r); from mlplatform import progress\n"
                "progress.report(step=1); progress.report(step=2); assert progress.flush(5)\n") % SRC
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stderr.count("reporting disabled"), 1, out.stderr)
        self.assertEqual(len(self.server.requests), 0)


if __name__ == "__main__":
    unittest.main()
