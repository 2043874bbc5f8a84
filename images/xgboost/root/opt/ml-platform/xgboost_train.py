"""Example distributed XGBoost training for a TrainingJob with framework xgboost.

Started once per pod with exactly the environment a Kubeflow XGBoostJob
gives (the native backend gives the same):
  MASTER_ADDR, MASTER_PORT  the Master (rank 0), where the tracker listens
  WORLD_SIZE                the number of pods
  RANK                      this pod's rank, 0 on the Master
(WORKER_ADDRS and WORKER_PORT, meant for LightGBM, are not needed.) Without
them it trains alone.

XGBoost's workers meet through a rabit tracker. Nothing starts one for a
Kubeflow XGBoostJob, so rank 0 runs it in a thread: it listens on every
interface at MASTER_PORT (its own Service name may not resolve yet when it
starts) and waits for WORLD_SIZE workers. Every rank, rank 0 included,
then joins through collective.CommunicatorContext at MASTER_ADDR:MASTER_PORT
with its RANK as task id, zero-padded so that the tracker (sortby="task")
gives each worker XGBoost rank == RANK. A worker waits until MASTER_ADDR
resolves (XGBoost gives up at once on a name that does not resolve) and
retries the tracker's port (DMLC_WORKER_CONNECT_RETRY), because ranks start
in any order. The script never probes the tracker's port itself: the
1.7 tracker waits forever on a connection that sends nothing.

The training: a regression on a fixed synthetic dataset, each rank holding
the rows rank::WORLD_SIZE; XGBoost allreduces the histograms, so every rank
ends with the same model and the same evaluation metric.

Knobs: XGB_ROUNDS (boosting rounds, default 20), XGB_CONNECT_SECONDS (how
long to wait for MASTER_ADDR to resolve, default 600).
Output: one line per round, a final line "RESULT {json}", and the same JSON
as the container's termination message (/dev/termination-log), where the
Kubernetes API shows it: rank, world, XGBoost's own rank and world size,
an allreduce check (every rank adds rank+1), rounds, the first and last
training RMSE and the SHA-256 of the model.
"""

import hashlib
import json
import os
import socket
import sys
import time

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

try:
    from mlplatform import progress
except ImportError:  # an image without the progress helper
    progress = None

TERMINATION_LOG = "/dev/termination-log"


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value else default


def log(msg):
    print(msg, flush=True)


def resolve(host, timeout):
    """The IPv4 address of host, waiting for its DNS record to appear."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        except socket.gaierror as e:
            if time.monotonic() > deadline:
                raise RuntimeError("%s does not resolve after %ds: %s" % (host, timeout, e))
            time.sleep(1)


def dataset(rank, world):
    """Rows rank::world of y = 2*x0 - x1 + x2**2 + noise."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 3))
    y = 2.0 * x[:, 0] - x[:, 1] + x[:, 2] ** 2 + 0.05 * rng.normal(size=4000)
    return xgb.DMatrix(x[rank::world], label=y[rank::world])


class Report(xgb.callback.TrainingCallback):
    """Logs each round's metric and reports it as progress on rank 0."""

    def __init__(self, rank, rounds):
        self.rank, self.rounds = rank, rounds

    def after_iteration(self, model, epoch, evals_log):
        rmse = evals_log["train"]["rmse"][-1]
        log("round %d train-rmse %.6f" % (epoch + 1, rmse))
        if progress and self.rank == 0:
            progress.report(step=epoch + 1, total=self.rounds, metrics={"rmse": rmse})
        return False


def train(rank, world, rounds):
    """Trains on this rank's shard; returns the result to report."""
    check = collective.allreduce(np.array([rank + 1.0]), collective.Op.SUM)[0]
    history = {}
    booster = xgb.train(
        {"objective": "reg:squarederror", "tree_method": "hist", "max_depth": 4, "eta": 0.3, "nthread": 1},
        dataset(rank, world), num_boost_round=rounds, evals=[(dataset(rank, world), "train")],
        evals_result=history, verbose_eval=False, callbacks=[Report(rank, rounds)])
    rmse = history["train"]["rmse"]
    return {
        "rank": rank, "world": world,
        "xgboostRank": collective.get_rank(), "xgboostWorld": collective.get_world_size(),
        "allreduce": float(check), "rounds": booster.num_boosted_rounds(),
        "firstRMSE": rmse[0], "lastRMSE": rmse[-1],
        "modelSHA256": hashlib.sha256(bytes(booster.save_raw("json"))).hexdigest(),
    }


def main():
    world = env_int("WORLD_SIZE", 1)
    rank = env_int("RANK", 0)
    rounds = env_int("XGB_ROUNDS", 20)
    log("rank %d/%d master %s:%s" % (rank, world, os.environ.get("MASTER_ADDR", "-"), os.environ.get("MASTER_PORT", "-")))
    if world > 1:
        port = env_int("MASTER_PORT", 9999)
        if rank == 0:
            tracker = RabitTracker(host_ip="0.0.0.0", n_workers=world, port=port, sortby="task")
            tracker.start(world)
            log("tracker listening on port %d for %d workers" % (tracker.port, world))
        addr = resolve(os.environ["MASTER_ADDR"], env_int("XGB_CONNECT_SECONDS", 600))
        args = {"DMLC_TRACKER_URI": addr, "DMLC_TRACKER_PORT": port, "DMLC_TASK_ID": "%08d" % rank,
                "DMLC_WORKER_CONNECT_RETRY": 20}
        with collective.CommunicatorContext(**args):
            result = train(rank, world, rounds)
        if rank == 0:
            tracker.join()
    else:
        result = train(0, 1, rounds)

    if progress and rank == 0:
        if not progress.flush(15):
            log("progress: the final report was not sent")
    line = json.dumps(result, sort_keys=True)
    log("RESULT " + line)
    # The kubelet creates the file before the container starts; outside
    # Kubernetes there is none, and none is created.
    if os.path.isfile(TERMINATION_LOG):
        with open(TERMINATION_LOG, "w") as f:
            f.write(line)
    ok = (result["xgboostRank"] == rank and result["xgboostWorld"] == world
          and result["allreduce"] == world * (world + 1) / 2.0 and result["lastRMSE"] < result["firstRMSE"])
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
