"""A small training script for the torch-allreduce experiment: the communication of data-parallel training,
nothing else. Run by torchrun through the hook, as a user's script would be::

    torchrun ... -m mlroute.torch torch_train.py --mb 2 --iters 4 --compute 1

It all-reduces an M MB float32 tensor (gloo, CPU) I times, sleeping ``--compute`` seconds before each (the
compute phase), and prints one JSON line per iteration: {"rank", "iteration", "seconds"}: the all-reduce's own
time on this rank, measured from a barrier that lines the ranks up after the compute phase (so a rank still
sleeping is not counted as network time). Before the first it prints {"rank", "event": "ready", "init_s"}.
With ``--start-after FILE`` it waits for FILE before the first iteration (the experiment creates it once every
job is past init_process_group), and with ``--hold-until FILE`` for FILE after the last one (created once every
job has finished measuring): on a machine with few cores, a job's start (torch's import and init are seconds of
CPU per rank) or its exit (as much again) must not land in another job's iteration.

Only the standard library and torch: it runs under any interpreter that has torch (Debian's python3-torch 1.13
or PyTorch 2.x), and knows nothing of mlroute.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, required=True, help="tensor size in MB (10^6 bytes), float32")
    ap.add_argument("--iters", type=int, required=True)
    ap.add_argument("--compute", type=float, default=1.0, help="seconds of 'compute' before each all-reduce")
    ap.add_argument("--start-after", metavar="FILE",
                    help="before the first iteration, wait (at most --hold-max s) until FILE exists: jobs sharing a "
                         "machine's CPUs then start measuring together, not while another still starts")
    ap.add_argument("--hold-until", metavar="FILE",
                    help="after the last iteration, wait (at most --hold-max s) until FILE exists before tearing "
                         "down: jobs sharing a machine's CPUs then exit together, not while another still measures")
    ap.add_argument("--hold-max", type=float, default=120.0)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    started = time.monotonic()
    dist.init_process_group("gloo")  # env:// from torchrun; the hook declares the job before this returns
    rank, world = dist.get_rank(), dist.get_world_size()
    grad = torch.ones(max(1, int(args.mb * 1e6 / 4)), dtype=torch.float32)
    _emit({"rank": rank, "event": "ready", "init_s": round(time.monotonic() - started, 3), "world": world,
           "pid": os.getpid()})
    _wait_for(args.start_after, args.hold_max)
    for it in range(args.iters):
        time.sleep(args.compute)
        dist.barrier()
        t0 = time.monotonic()
        dist.all_reduce(grad)
        seconds = time.monotonic() - t0
        grad /= world  # an average, as DDP's: the values stay 1.0
        _emit({"rank": rank, "iteration": it, "seconds": round(seconds, 4)})
    _wait_for(args.hold_until, args.hold_max)
    if abs(float(grad[0]) - 1.0) > 1e-3:
        print(f"rank {rank}: all-reduce gave {float(grad[0])}, expected 1.0", file=sys.stderr)
        return 1
    dist.destroy_process_group()
    return 0


def _wait_for(path: str | None, at_most_s: float) -> None:
    deadline = time.monotonic() + at_most_s
    while path and not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    sys.exit(main())
