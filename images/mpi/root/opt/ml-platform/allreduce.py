"""An mpi4py allreduce that proves every rank took part.

Every rank contributes rank+1; the sum over a world of n ranks is
n*(n+1)/2. Rank 0 prints the reduced value and the expected one, and every
rank fails unless they agree, so the job succeeds only when the whole world
met through MPI.
"""

import socket
import sys

import numpy
from mpi4py import MPI


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
    if int(total[0]) != expected:
        print(f"rank {rank}: allreduce gave {int(total[0])}, expected {expected}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
