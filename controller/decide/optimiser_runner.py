"""Traffic-engineering decisions off the event loop: a worker process runs ``te.decide`` on a ``TEInput`` and
answers a ``TEDecision`` (values both ways: no engineer, no pin table of its own), the loop takes it over, and a
decision that runs past its deadline is dropped (the routing in force stays).

Why a process: Ryu's single event loop must keep answering echo requests, LLDP and packet-ins while an
optimiser searches (a 60 s ILP inside it disconnects every switch), and under Ryu's eventlet monkey-patching
threads are green, so a thread would block the loop all the same. The worker is a fresh interpreter (no fork
of a process full of green threads, no re-import of ryu-manager's main module as multiprocessing's spawn
would do) started once and kept: it imports the routing core once and then serves one decision at a time over
its stdin / stdout. A late decision costs its worker (terminated, respawned for
the next one); the loop never waits: ``submit`` and ``poll`` return at once.

The fabric (the input's ``fabric``) is sent once: while its ``identity`` is unchanged the loop sends a
``SameFabric`` marker and the worker uses the copy it kept (pickling a k=16 fat-tree's fabric cost the event
loop 63 ms and the worker 250 ms per decision); a new topology, or a fresh worker, gets the fabric again. A
fabric that is the worker's with links down (a link failure: ``Fabric.with_failed_links``) goes as a
``FabricWithLinksDown``, which the worker derives from the one it holds; a restored link brings back the
one it holds, sent as ``SameFabric``.

Ryu-free and clock-injected, so the loop's side is unit-tested with real optimiser runs.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controller.decide.te import TEDecision, TEInput, TEResult

LOG = logging.getLogger("mlroute")

DONE = "done"  # the decision came back: apply it
LATE = "late"  # past its deadline: the worker was stopped, the routing in force stays
FAILED = "failed"  # the decision raised (or the worker died): the routing in force stays

DEFAULT_GRACE_S = 2.0  # beyond the optimiser's own budget: pickling, fabric set-up, the comparison of routings
_PRELOAD = ("controller.decide.te", "mlroute.routing.optimisers.mlroute", "mlroute.routing.optimisers.greedy")


@dataclass(frozen=True)
class Outcome:
    status: str  # DONE, LATE or FAILED
    generation: Any  # what ``submit`` was given (the core: the decision's elephants, for their demands)
    decision: TEDecision | None = None  # the decision (DONE); ``unchanged``: the pins in force stand
    error: str = ""

    @property
    def result(self) -> TEResult | None:
        return None if self.decision is None else self.decision.result


@dataclass(frozen=True)
class SameFabric:
    """In place of a fabric the worker already holds: the one with this ``identity``."""

    identity: Any


@dataclass(frozen=True)
class FabricWithLinksDown:
    """In place of a fabric: the one the worker holds (``base``, its identity) with the links ``down`` failed,
    named ``uid`` (``Fabric.with_failed_links``: the same fabric the loop has, without pickling it)."""

    base: Any
    down: tuple
    uid: str


def serve(inbox: Connection, outbox: Connection) -> None:
    """Worker: import the routing core once, say so, then decide each input it is sent."""
    import gc
    import importlib

    for name in _PRELOAD:
        importlib.import_module(name)
    from controller.decide.te import decide
    from mlroute.routing import kernels

    kernels.warm()  # compiled (or loaded from numba's cache) before the first decision, not during it
    gc.freeze()  # the modules: never garbage, never scanned again
    if not _answer(outbox, ("ready",)):
        return
    kept: Any = None  # the last fabric sent whole (its caches warm from the decisions taken on it)
    derived: Any = None  # the last one derived from it (FabricWithLinksDown)
    while True:
        # What survived the last decision (the fabric and its path caches, the pins) joins the permanent
        # generation, so the collections a decision triggers scan only what it allocated: a full collection over
        # a k=24 fabric's caches landed in every decision at 10k elephants (100-200 ms of its 1.1 s). Young
        # cycles are collected first; a new fabric unfreezes everything so that the old one can go.
        gc.collect(1)
        gc.freeze()
        try:
            task = inbox.recv()
        except EOFError:
            return
        if task is None:
            return
        fabric, inp = task
        answer: tuple
        try:
            if isinstance(fabric, SameFabric):
                fabric = next((f for f in (kept, derived) if f is not None and f.identity == fabric.identity), None)
                if fabric is None:
                    raise RuntimeError("the worker does not hold the fabric it was told to reuse")
            elif isinstance(fabric, FabricWithLinksDown):
                if kept is None or kept.identity != fabric.base:
                    raise RuntimeError("the worker does not hold the fabric it was told to derive from")
                if derived is not None:  # the one it replaces (and its caches) may be collected now
                    derived = None
                    gc.unfreeze()
                    gc.collect()
                fabric = derived = kept.with_failed_links(fabric.down, fabric.uid)
            elif getattr(fabric, "identity", None) is not None:
                if kept is not None:  # the fabric it replaces (and its caches) may be collected now
                    kept = derived = None
                    gc.unfreeze()
                    gc.collect()
                kept = fabric
            answer = (DONE, decide(replace(inp, fabric=fabric)), "")
        except Exception as exc:  # reported to the loop, which keeps the routing in force
            answer = (FAILED, None, f"{type(exc).__name__}: {exc}")
        if not _answer(outbox, answer):
            return


def _answer(outbox: Connection, message: tuple) -> bool:
    """Send ``message`` to the controller; False when it is gone (killed mid-decision: a broken pipe is its
    end, not an error to print into its log)."""
    try:
        outbox.send(message)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


# the worker's program: messages on stdin / stdout, anything printed goes to stderr
_WORKER = """
import os, sys
from multiprocessing.connection import Connection
out = os.dup(1)
os.dup2(2, 1)
from controller.decide.optimiser_runner import serve
serve(Connection(0, writable=False), Connection(out, readable=False))
"""


class OptimiserRunner:
    """One decision at a time in a worker process, with a deadline of ``budget_s + grace_s`` per decision."""

    def __init__(self, budget_s: float, grace_s: float = DEFAULT_GRACE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget_s = float(budget_s)
        self.deadline_s = self.budget_s + float(grace_s)
        self.clock = clock
        self._proc: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None  # pickled messages to the worker
        self._conn: Connection | None = None  # ... and from it
        self._ready = False
        self._task: tuple[Any, float] | None = None  # (generation, started) of the decision in flight
        self._held: Any = None  # identity of the fabric the worker holds (None: send the next one whole)
        self._held_derived: Any = None  # ... and of the one it derived from that one (FabricWithLinksDown)
        self._final = False  # closed for good (the app's release): no worker is started again
        self._sending = False  # a task is being written to the worker (a large fabric: the writer may yield)
        self.late = 0  # decisions dropped for running late (a metric for the shell)
        self.fabrics_sent = 0  # fabrics pickled to the worker (the others were SameFabric markers)

    # -- worker lifetime -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker (it warms up in the background: ``submit`` refuses until it is ready)."""
        if self._proc is not None or self._final:
            return
        # a plain fresh interpreter: no re-import of the caller's __main__ (ryu-manager), no eventlet in it
        self._proc = proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, close_fds=True)
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        self._send = Connection(os.dup(proc.stdin.fileno()), readable=False)
        self._conn = Connection(os.dup(proc.stdout.fileno()), writable=False)
        proc.stdin.close()
        proc.stdout.close()
        self._ready, self._task, self._held, self._held_derived = False, None, None, None

    def close(self, final: bool = False) -> None:
        """Stop the worker (a decision in flight is dropped). ``final``: for good (the app's release): the loops
        still running while the process ends neither start another worker nor report this one's end (at a
        container's stop: "ended before it was ready (exit status -9)", the kill below seen from the loop)."""
        self._final = self._final or final
        if self._proc is None:
            return
        try:
            # the polite goodbye only when nothing else is writing: a decision loop still sending a task (green
            # threads: its write yields on a full pipe) and this write would collide (eventlet: "Second
            # simultaneous write", seen at SIGTERM in 4 of 18 stops); the kill below ends the worker either way
            if self._task is None and self._ready and self._send is not None and not self._sending:
                self._send.send(None)
                self._proc.wait(1.0)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        for conn in (self._send, self._conn):
            if conn is not None:
                conn.close()
        self._proc = self._send = self._conn = self._task = self._held = self._held_derived = None
        self._ready = False

    @property
    def ready(self) -> bool:
        """The worker is up and idle: a decision may be submitted."""
        self._check_ready()
        return self._ready and self._task is None

    @property
    def busy(self) -> bool:
        return self._task is not None

    @property
    def worker_pid(self) -> int | None:
        """The worker process's id (None when none runs): what a benchmark reads its CPU time from."""
        return None if self._proc is None else self._proc.pid

    def _check_ready(self) -> None:
        if self._final:
            return
        if self._proc is None:
            self.start()
        if not self._ready and self._conn is not None and self._conn.poll(0):
            try:
                self._ready = self._conn.recv() == ("ready",)
            except (EOFError, OSError):
                code = self._proc.poll() if self._proc is not None else None
                LOG.warning("optimiser worker (pid %s) ended before it was ready (exit status %s): starting "
                            "another", self.worker_pid, code)
                self.close()

    # -- decisions -----------------------------------------------------------------------------------------
    def submit(self, task: TEInput, generation: Any = None) -> bool:
        """Send ``te.decide(task)`` to the worker. False (nothing sent) while one is in flight or the worker is
        still warming up: the routing in force stays meanwhile."""
        if self._final or not self.ready or self._send is None:
            return False
        identity = task.identity
        fabric = self._fabric_message(task.fabric)
        self._sending = True
        try:
            self._send.send((fabric, replace(task, fabric=None)))
        except (OSError, ValueError):  # the worker died (or was closed meanwhile): a fresh one next period
            self._sending = False
            self.close()
            return False
        finally:
            self._sending = False
        if self._send is None:  # closed while the task was being written
            return False
        if isinstance(fabric, FabricWithLinksDown):
            self._held_derived = identity
        elif identity is not None and not isinstance(fabric, SameFabric):
            self._held, self._held_derived = identity, None
            self.fabrics_sent += 1
        self._task = (generation, self.clock())
        return True

    def _fabric_message(self, fabric: Any) -> Any:
        """What stands for ``fabric`` in the task sent: a marker when the worker holds it, or holds the fabric
        it is with links down; else the fabric itself."""
        identity = None if fabric is None else fabric.identity
        if identity is not None and identity in (self._held, self._held_derived):
            return SameFabric(identity)
        base = getattr(fabric, "derived_from", None)
        if identity is not None and base is not None and base == self._held:
            return FabricWithLinksDown(self._held, tuple(tuple(link) for link in fabric.failed_links), identity[0])
        return fabric

    def poll(self) -> Outcome | None:
        """The decision in flight, if it ended (DONE / FAILED) or ran past its deadline (LATE); else None."""
        if self._task is None or self._conn is None or self._proc is None:
            return None  # (a decision in flight has its worker)
        generation, started = self._task
        try:
            if self._conn.poll(0):
                status, decision, error = self._conn.recv()
                self._task = None
                if status != DONE:
                    self._held = self._held_derived = None  # whatever went wrong: the next one sent whole
                return Outcome(status, generation, decision, error)
        except (EOFError, OSError):
            self.close()
            return Outcome(FAILED, generation, error="the optimiser worker died")
        if self._proc.poll() is not None:
            self.close()
            return Outcome(FAILED, generation, error="the optimiser worker died")
        if self.clock() - started > self.deadline_s:
            self.close()  # the search cannot be interrupted from outside: its process can
            self.late += 1
            return Outcome(LATE, generation,
                           error=f"no decision within {self.deadline_s:g} s (budget {self.budget_s:g} s)")
        return None

    def wait(self, timeout: float) -> Outcome | None:
        """Block until the decision in flight ends, at most ``timeout`` seconds (tests and shutdown only:
        the loop calls ``poll``)."""
        if self._task is None or self._conn is None:
            return None
        if self._conn.poll(timeout):
            return self.poll()
        return None

    def wait_ready(self, timeout: float) -> bool:
        """Block until the worker is ready, at most ``timeout`` seconds (tests and start-up)."""
        self._check_ready()
        if not self._ready and self._conn is not None and self._conn.poll(timeout):
            self._check_ready()
        return self.ready
