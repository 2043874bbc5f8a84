"""Example distributed training that follows the TrainingJob checkpoint contract.

Started once per process, directly with /usr/bin/python3 (Debian's torchrun
crashes under Python 3.11), by a Kubeflow PyTorchJob or by hand: the
process group comes from MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK
(one process alone when they are missing) over gloo (CPU).

The checkpoint contract (apis/training/v1alpha1, Checkpoint):
  MLPLATFORM_CHECKPOINT_DIR  the checkpoint volume (on the ranks that mount it)
  MLPLATFORM_RUN             run index, from 1
  MLPLATFORM_RESTART_COUNT   failures restarted so far
  MLPLATFORM_RESUME          "true" when an earlier run may have left a checkpoint
Rank 0 loads the newest complete checkpoint when there is one, shares the
restored state with the other ranks (DDP broadcasts rank 0's parameters, the
step is broadcast explicitly) and writes checkpoints atomically: to a
temporary name, then rename.

Progress: rank 0 reports each step, the loss and the final step to the
operator with mlplatform.progress (a no-op where the operator gave no
endpoint), so the TrainingJob's status.progress and `mlp train submit`
show them.

Knobs: TRAIN_STEPS (total steps, default 60), CHECKPOINT_EVERY (default 10),
STEP_SECONDS (sleep per step, default 0; lets tests kill a job mid-run).
Output: one line per step ("step N loss X"), and a final line
"RESULT {json}" with the allreduce check, losses and steps.
"""

import glob
import json
import os
import re
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

try:
    from mlplatform import progress
except ImportError:  # run outside the image
    progress = None


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value else default


def log(msg):
    print(msg, flush=True)


def newest_checkpoint(directory):
    """The complete checkpoint with the highest step; temporaries never match."""
    best = None
    for path in glob.glob(os.path.join(directory, "ckpt-*.pt")):
        m = re.fullmatch(r"ckpt-(\d+)\.pt", os.path.basename(path))
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), path)
    return best[1] if best else None


def save_checkpoint(directory, step, model, optimizer):
    tmp = os.path.join(directory, ".ckpt-%d.pt.tmp" % step)
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(directory, "ckpt-%d.pt" % step))
    # Keep the two newest: the previous one survives a crash while writing.
    for path in sorted(glob.glob(os.path.join(directory, "ckpt-*.pt")),
                       key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))[:-2]:
        os.remove(path)


def main():
    world = env_int("WORLD_SIZE", 1)
    rank = env_int("RANK", 0)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group("gloo", rank=0, world_size=1)

    steps = env_int("TRAIN_STEPS", 60)
    every = env_int("CHECKPOINT_EVERY", 10)
    pause = float(os.environ.get("STEP_SECONDS", "0") or 0)
    ckpt_dir = os.environ.get("MLPLATFORM_CHECKPOINT_DIR", "")
    log("rank %d/%d run=%s restarts=%s resume=%s checkpoint_dir=%s" % (
        rank, world, os.environ.get("MLPLATFORM_RUN", "-"), os.environ.get("MLPLATFORM_RESTART_COUNT", "-"),
        os.environ.get("MLPLATFORM_RESUME", "-"), ckpt_dir or "-"))

    # The collective works: every rank adds rank+1.
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    allreduce, expected = t.item(), world * (world + 1) / 2.0
    log("allreduce %g expected %g" % (allreduce, expected))
    if allreduce != expected:
        log("allreduce mismatch")
        return 2

    # A linear regression y = 3x + 2 on a fixed dataset, sharded by rank.
    torch.manual_seed(0)
    x = torch.randn(1024, 1)
    y = 3.0 * x + 2.0 + 0.01 * torch.randn(1024, 1)
    x, y = x[rank::world], y[rank::world]
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    start = 0
    path = newest_checkpoint(ckpt_dir) if ckpt_dir and rank == 0 else None
    if path:
        state = torch.load(path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        log("resumed from %s at step %d" % (path, start))
    elif rank == 0 and os.environ.get("MLPLATFORM_RESUME") == "true":
        log("resume requested but no checkpoint found; starting at step 0")
    # The other ranks learn the step from rank 0; DDP's constructor
    # broadcasts rank 0's parameters.
    s = torch.tensor([start])
    dist.broadcast(s, src=0)
    start = int(s.item())
    ddp = DistributedDataParallel(model)
    loss_fn = torch.nn.MSELoss()

    first = last = None
    for step in range(start + 1, steps + 1):
        optimizer.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        last = loss.item()
        first = last if first is None else first
        log("step %d loss %.6f" % (step, last))
        if progress and rank == 0:
            progress.report(step=step, total=steps, metrics={"loss": last})
        if ckpt_dir and rank == 0 and (step % every == 0 or step == steps):
            save_checkpoint(ckpt_dir, step, model, optimizer)
            log("checkpoint step %d" % step)
        if pause:
            time.sleep(pause)

    if progress and rank == 0:
        # A resumed run that had nothing left to do still reports its end.
        progress.report(step=steps, total=steps, metrics={"loss": last} if last is not None else None)
        if not progress.flush(15):
            log("progress: the final report was not sent")
    w, b = model.weight.item(), model.bias.item()
    log("RESULT " + json.dumps({
        "rank": rank, "world": world, "allreduce": allreduce, "expected": expected,
        "start_step": start, "final_step": steps, "first_loss": first, "last_loss": last,
        "weight": w, "bias": b}))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
