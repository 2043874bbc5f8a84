"""An mpi4py allreduce that proves every rank took part.

Every rank contributes rank+1; the sum over a world of n ranks is
n*(n+1)/2. Rank 0 prints the reduced value and the expected one, and every
rank fails unless they agree, so the job succeeds only when the whole world
met through MPI. Rank 0 also reports the result as the training's progress
(one step of one, with the sum and the world size as metrics) through the
platform's progress helper, which finds world rank 0 in Open MPI's
OMPI_COMM_WORLD_RANK: the other ranks report nothing.
"""

import socket
import sys

import numpy
from mpi4py import MPI

try:
    from mlplatform import progress
except ImportError:  # an image without the progress helper
    progress = None


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    value = numpy.array([rank + 1], dtype="i8")
    total = numpy.zeros(1, dtype="i8")
    comm.Allreduce(value, total, op=MPI.SUM)
    hosts = comm.gather(socket.gethostname(), root=0)
    expected = size * (size + 1) // 2
    if rank == 0:
        print(f"allreduce size={size} sum={int(total[0])} expected={expected} hosts={len(set(hosts))}", flush=True)
    # Every rank calls the helper; it sends from world rank 0 only.
    if progress:
        progress.report(step=1, total=1, metrics={"sum": int(total[0]), "ranks": size, "hosts": len(set(hosts or []))})
        if not progress.flush(15):
            print("progress: the final report was not sent", file=sys.stderr, flush=True)
    if int(total[0]) != expected:
        print(f"rank {rank}: allreduce gave {int(total[0])}, expected {expected}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
