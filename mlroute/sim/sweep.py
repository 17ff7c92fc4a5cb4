"""Independent simulation tasks run in parallel -- local worker processes or a Dask distributed cluster -- each
result stored under the output directory as it arrives, so a run that is killed half-way and started again does
only what is missing.

A :class:`Task` is a module-level function and its (picklable) argument; its *key* digests everything that
determines the result: the argument and :func:`code_version` (the source of the ``mlroute`` package that computes
it). Results come back in task order whatever the number of workers or the order in which they finish, so a
parallel sweep writes what a serial one writes. Tasks are started longest first (``cost``, an estimate) so that
the last worker to finish is not the one that drew the biggest task at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

#: thread pools of the numeric libraries a worker process would otherwise size to every core: with N workers on
#: N cores that oversubscribes the machine.
_ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


@dataclass(frozen=True)
class Task:
    """One unit of work: ``fn(arg)``, a JSON-able result. ``arg`` must be JSON-able too (its digest is the key)."""

    fn: Callable[[Any], dict]
    arg: Any
    label: str
    cost: float = 1.0

    def key(self) -> str:
        blob = json.dumps({"fn": f"{self.fn.__module__}.{self.fn.__qualname__}", "arg": self.arg,
                           "code": code_version()}, sort_keys=True, default=list)
        return hashlib.blake2b(blob.encode(), digest_size=12).hexdigest()


_CODE_VERSION: str | None = None


def code_version() -> str:
    """A digest of every Python source file of the ``mlroute`` package: a stored result is reused only by the
    code that computed it (a git commit would miss uncommitted changes and does not exist in an installed
    package)."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.blake2b(digest_size=12)
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
        _CODE_VERSION = h.hexdigest()
    return _CODE_VERSION


class ResultStore:
    """Finished tasks' results, one JSON file per key under ``directory`` (written atomically: a file is either
    whole or absent, whatever moment the run is killed at)."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)

    def _path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            with open(self._path(key), encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def put(self, key: str, result: dict, label: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self._path(key).with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"label": label, "code": code_version(), "result": result}, fh, separators=(",", ":"))
        os.replace(tmp, self._path(key))


@dataclass
class SweepStats:
    """What a sweep did: tasks reused from the store, computed now, its wall time and the tasks' summed time."""

    total: int = 0
    reused: int = 0
    computed: int = 0
    wall_s: float = 0.0
    task_s: float = 0.0
    workers: int = 1
    executor: str = "serial"


class _Progress:
    """A bar with ETA (tqdm) on a terminal; otherwise one plain line per finished task with the same ETA. Both
    measure progress in the tasks' estimated cost, not their count: the costliest start first, so a count would
    promise the end far too late."""

    def __init__(self, costs: Sequence[float], done: Sequence[int], log: TextIO | None, label: str):
        self.log, self.costs = log, costs
        self.total, self.done = len(costs), len(done)
        self.total_cost = sum(costs) or 1.0
        self.done_cost = self.start_cost = sum(costs[i] for i in done)
        self.t0 = time.monotonic()
        self.bar = None
        if log is not None and log.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=self.total_cost, initial=self.done_cost, desc=label, file=log, dynamic_ncols=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix} [{elapsed}<{remaining}]")
            self.bar.set_postfix_str(self._count(), refresh=True)

    def _count(self) -> str:
        return f"{self.done}/{self.total} runs"

    def step(self, i: int, line: str) -> None:
        self.done += 1
        self.done_cost += self.costs[i]
        if self.bar is not None:
            self.bar.write(line, file=self.log)
            self.bar.set_postfix_str(self._count(), refresh=False)
            self.bar.update(self.costs[i])
        elif self.log is not None:
            print(f"[{self.done}/{self.total}] {line} ({self._eta()})", file=self.log, flush=True)

    def _eta(self) -> str:
        elapsed = time.monotonic() - self.t0
        ran = self.done_cost - self.start_cost
        left = (self.total_cost - self.done_cost) * elapsed / ran if ran > 0 else float("nan")
        return f"{_clock(elapsed)} elapsed, ETA {_clock(left)}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _clock(s: float) -> str:
    if s != s:  # nan
        return "?"
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_tasks(tasks: Sequence[Task], *, store: ResultStore | None = None, workers: int | None = None,
              scheduler: str | None = None, fresh: bool = False, log: TextIO | None = sys.stderr,
              label: str = "sweep", describe: Callable[[Task, dict], str] | None = None,
              in_process: bool = False) -> tuple[list[dict], SweepStats]:
    """Every task's result in task order, and what the sweep did.

    ``store``: reuse the results found there (unless ``fresh``) and add each new one as it arrives.
    ``workers``: local worker processes (default :func:`default_workers`; 1 runs in this process);
    ``scheduler``: the address of a Dask distributed scheduler (``tcp://host:8786``) to run on instead.
    ``in_process``: run here, serially, whatever ``workers`` says (tasks whose function cannot be pickled).
    ``describe(task, result)``: the line logged when a task finishes."""
    t0 = time.monotonic()
    results: list[dict | None] = [None] * len(tasks)
    keys = [t.key() for t in tasks] if store is not None else [None] * len(tasks)
    todo = []
    for i, key in enumerate(keys):
        hit = None if fresh or store is None or key is None else store.get(key)
        if hit is not None:
            results[i] = hit["result"]
        else:
            todo.append(i)
    stats = SweepStats(total=len(tasks), reused=len(tasks) - len(todo), computed=len(todo))
    if store is not None and log is not None and (stats.reused or fresh):
        print(f"{label}: {stats.reused} of {stats.total} runs already done under {store.dir}, "
              f"{stats.computed} to run" + (" (--fresh: recomputing every run)" if fresh else
                                             " (--fresh recomputes them)"), file=log, flush=True)
    todo.sort(key=lambda i: -tasks[i].cost)  # longest first; results still land in task order
    workers = max(1, workers or default_workers())
    pending = set(todo)
    progress = _Progress([max(t.cost, 1e-9) for t in tasks], [i for i in range(len(tasks)) if i not in pending],
                         log, label)
    describe = describe or (lambda task, res: task.label)
    try:
        if in_process or (not scheduler and (workers == 1 or len(todo) <= 1)):
            stats.executor, stats.workers = "serial", 1
            finished = ((i, tasks[i].fn(tasks[i].arg)) for i in todo)
        elif scheduler:
            stats.executor = "dask"
            finished = _run_dask(tasks, todo, scheduler, stats)
        else:
            stats.executor, stats.workers = "processes", min(workers, len(todo))
            finished = _run_processes(tasks, todo, stats.workers)
        for i, res in finished:
            results[i] = res
            if store is not None and keys[i] is not None:
                store.put(keys[i], res, tasks[i].label)
            progress.step(i, describe(tasks[i], res))
    finally:
        progress.close()
    stats.wall_s = time.monotonic() - t0
    stats.task_s = sum(float(r.get("task_s", 0.0)) for r in results if r is not None)
    return [r for r in results if r is not None], stats


@contextlib.contextmanager
def _single_threaded_children() -> Iterator[None]:
    """Worker processes started inside this block see one thread per numeric library."""
    saved = {k: os.environ.get(k) for k in _ONE_THREAD}
    for k in _ONE_THREAD:
        os.environ.setdefault(k, "1")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_processes(tasks: Sequence[Task], todo: list[int], workers: int) -> Iterator[tuple[int, dict]]:
    """(index, result) as local worker processes finish them. Spawned, not forked: the parent may hold threads
    (a progress bar's monitor, numba's), which a fork would copy in an arbitrary state. The workers ignore
    SIGINT (Ctrl-C reaches the whole process group): the parent stops them, at once, however it is stopped."""
    ctx = multiprocessing.get_context("spawn")
    with _single_threaded_children():
        pool = ctx.Pool(workers, initializer=_worker_start)
    try:
        yield from pool.imap_unordered(_indexed, [(i, tasks[i].fn, tasks[i].arg) for i in todo], chunksize=1)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _worker_start() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _indexed(job: tuple[int, Callable[[Any], dict], Any]) -> tuple[int, dict]:
    i, fn, arg = job
    return i, fn(arg)


def _run_dask(tasks: Sequence[Task], todo: list[int], scheduler: str, stats: SweepStats
              ) -> Iterator[tuple[int, dict]]:
    """(index, result) as the cluster's workers finish them; longest first through Dask's priorities. The
    workers need this package installed (the same version: a result is keyed by the code that computed it)."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        from mlroute.errors import UsageError

        raise UsageError("--scheduler needs Dask's distributed scheduler: pip install 'mlroute[dask]'") from None
    try:
        client = Client(scheduler, timeout=20)
    except (OSError, TimeoutError) as exc:
        from mlroute.errors import UsageError

        raise UsageError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc})") from None
    with client:
        stats.workers = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        futures = {client.submit(tasks[i].fn, tasks[i].arg, pure=False, priority=int(tasks[i].cost * 1000)): i
                   for i in todo}  # (pure=False: a key of its own per submission)
        for fut in as_completed(list(futures)):
            yield futures[fut], fut.result()
