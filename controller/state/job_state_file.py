"""The file a single controller keeps its declared jobs in (controller/state/job_store.py's document), so a
restart or a crash does not forget them.

Written whenever the job list changes (a POST, PUT, DELETE, renew, an expired lease), by one writer holding one
lock, with an atomic replace: a temporary file in the same directory, fsync, ``os.replace``, fsync of the
directory. A crash at any moment leaves the previous complete file or the new one, never a mix. Read once, at
start, before the first decision. A file that cannot be used is reported once with its path and reason and
moved aside (``<file>.damaged``, so nothing is lost and the next write does not overwrite it); the controller
starts without its jobs. A failed write is logged (once until a write succeeds again) and never fails the call
that changed the jobs: routing goes on, only the restart would forget.

Where: ``state.file`` in the configuration (relative: to the configuration's directory); else beside the
configuration, named after it (``/etc/mlroute/mlroute.yaml`` -> ``/etc/mlroute/mlroute.jobs.json``); with no
configuration file, ``mlroute.jobs.json`` in the working directory. A cluster keeps its jobs in ZooKeeper and
has no such file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.state import job_store

LOG = logging.getLogger("mlroute")
SUFFIX = ".jobs.json"
NO_CONFIG_NAME = "mlroute" + SUFFIX


def path_for(state_file: str | None, config_file: str | None, cwd: str | Path | None = None) -> Path:
    """Where the job state lives (see the module's docstring), absolute: a later chdir does not move it."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    config_path = base / config_file if config_file else None
    if state_file:
        return (config_path.parent if config_path is not None else base) / state_file
    if config_path is not None:
        return config_path.with_name(config_path.stem + SUFFIX)
    return base / NO_CONFIG_NAME


class JobStateFile:
    """The job state's one reader and one writer. ``lease_clock`` is the clock the core's leases run on,
    ``wall`` the wall clock they are written in; ``configured`` the configuration's jobs (not written)."""

    def __init__(self, path: str | Path, configured: job_store.Jobs, lease_clock: Callable[[], float],
                 wall: Callable[[], float], rules: job_store.JobRules) -> None:
        self.path = Path(path)
        self.rules = rules
        self.configured = [dict(job) for job in configured]
        self.lease_clock, self.wall = lease_clock, wall
        self.lock = threading.RLock()  # held across "the list changed" and its write (CoreState.jobs)
        self._failing = False

    def restore(self) -> list[dict[str, Any]]:
        """The jobs in force at start: the configuration's combined with the saved ones (job_store.combine);
        only the configuration's when there is no usable file (reported once: path and reason)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            LOG.info("declared jobs: none saved yet; kept from now on in %s", self.path)
            return [dict(job) for job in self.configured]
        except OSError as exc:
            LOG.error("declared jobs: cannot read %s (%s): starting without its jobs", self.path,
                      exc.strerror or exc)
            return [dict(job) for job in self.configured]
        try:
            restored = job_store.parse(data, self.lease_clock, self.wall, self.rules)
            jobs = job_store.combine(self.configured, restored.jobs, self.rules)
        except (job_store.StateError, ValueError) as exc:
            LOG.error("declared jobs: %s is unusable (%s): starting without its jobs%s", self.path, exc,
                      self._set_aside())
            return [dict(job) for job in self.configured]
        if restored.ended:
            LOG.info("declared jobs ended at start: their lease ran out while the controller was down: %s",
                     ", ".join(restored.ended))
        LOG.info("declared jobs restored from %s: %s", self.path,
                 ", ".join(job["name"] for job in restored.jobs) or "none")
        return jobs

    def _set_aside(self) -> str:
        """The unusable file renamed ``<file>.damaged`` (its contents kept for a look): the log's note."""
        aside = self.path.with_name(self.path.name + ".damaged")
        try:
            os.replace(self.path, aside)
        except OSError as exc:
            return f"; could not move it aside ({exc.strerror or exc}): the next change overwrites it"
        return f"; moved aside to {aside}"

    def save(self, jobs: job_store.Jobs) -> bool:
        """``jobs`` (the whole list in force) written durably; False (logged once per run of failures) if not.
        Callers hold ``lock`` from changing the list until this returns, so the file never goes back in time."""
        with self.lock:
            data = job_store.dump(jobs, self.configured, self.lease_clock, self.wall)
            try:
                write_atomically(self.path, data)
            except OSError as exc:
                if not self._failing:
                    self._failing = True
                    LOG.error("declared jobs not saved to %s (%s): they would not survive a restart; "
                              "set state.file to a writable place", self.path, exc.strerror or exc)
                return False
            if self._failing:
                self._failing = False
                LOG.info("declared jobs saved to %s again", self.path)
            return True


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` as the whole of ``path``, or the old file untouched: temp file beside it, fsync, rename, fsync
    of the directory (the rename itself is durable)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dirfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)

