"""The controller's per-job REST, kept alive by a lease: PUT once, renew in a daemon thread, DELETE at the end.

Contract (controller side): ``PUT /mlroute/jobs/{name}`` with ``{"hosts", "rings", "weight"?, "lease_s"}``,
``POST /mlroute/jobs/{name}/renew`` (404 when the controller no longer has the job), ``DELETE
/mlroute/jobs/{name}``, ``Authorization: Bearer <token>``. A job that stops renewing ends when its lease runs out,
so a killed job never holds routes; this side only has to renew while it lives.

Training must never wait on or die of the controller: each call is bounded by a short timeout, only the first
PUT runs in the caller's thread, failures are logged (one warning per outage) and retried with back-off in the
background, and nothing here raises into the training script. urllib only: the hook runs in any environment.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from mlroute.errors import MlrouteError  # (standard library only: the hook's one mlroute import)

LOG = logging.getLogger("mlroute.torch")


class UnreachableError(MlrouteError):
    """No answer from the controller (refused, timed out, unresolvable): worth retrying later."""


@dataclass(frozen=True)
class Reply:
    status: int
    text: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class Controller:
    """The controller's REST root (``MLROUTE_URL``) and token. Direct connections: a proxy configured for the
    training environment's downloads has no business between a job and its controller."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 2.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def job_path(self, name: str) -> str:
        return f"/mlroute/jobs/{urllib.parse.quote(name, safe='')}"

    def call(self, method: str, path: str, body: Any = None, limit: int = 4096, timeout_s: float | None = None
             ) -> Reply:
        """One request; the controller's answer (its first ``limit`` bytes) whatever its status, UnreachableError
        when there is none within ``timeout_s`` (default: the controller's)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
            with self._opener.open(req, timeout=timeout_s or self.timeout_s) as resp:
                return Reply(resp.status, resp.read(limit).decode(errors="replace"))
        except urllib.error.HTTPError as exc:
            with exc:
                return Reply(exc.code, exc.read(limit).decode(errors="replace"))
        # OSError covers refused, reset and timed out (TimeoutError); ValueError a malformed URL
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            raise UnreachableError(str(getattr(exc, "reason", exc))) from None


def _retryable(status: int) -> bool:
    """Answers that may change by themselves: timeouts, rate limits, a controller in trouble or changing leader."""
    return status in (408, 425, 429) or status >= 500


class Lease:
    """One declared job: its body, the PUT that declares it, the renew loop and the DELETE that ends it.

    ``backoff`` = (first, longest) delay between retries after a failure, doubling in between."""

    def __init__(
        self,
        controller: Controller,
        name: str,
        job: dict[str, Any],
        lease_s: float,
        backoff: tuple[float, float] = (1.0, 30.0),
        log: logging.Logger = LOG,
    ):
        self.controller = controller
        self.name = name
        self.lease_s = lease_s
        self.interval_s = lease_s / 3
        self.backoff = backoff
        self.log = log
        self._lock = threading.Lock()
        self._job = {**job, "lease_s": lease_s}
        self._version = 0  # bumped by redeclare: a PUT of an older body does not count as declaring the new one
        self._need_put = True
        self.declared = False  # the controller accepted a PUT (and has not said it lost the job since)
        self._declared_once = False
        self._failures = 0
        self._outage = False
        self._lost_logged = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.ended = False

    @property
    def job(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._job)

    def start(self) -> None:
        """The first PUT in the caller's thread (bounded by the controller timeout), then the renew thread."""
        delay = self.step()
        if delay is None:
            return
        self._thread = threading.Thread(target=self._run, args=(delay,), name=f"mlroute-lease-{self.name}", daemon=True)
        self._thread.start()

    def redeclare(self, job: dict[str, Any]) -> None:
        """A new body for the same job (e.g. NCCL's rings once its log shows them): PUT from the thread at once."""
        with self._lock:
            self._job = {**job, "lease_s": self.lease_s}
            self._version += 1
            self._need_put = True
        self._wake.set()

    def step(self) -> float | None:
        """One PUT (not yet declared) or renew; the delay before the next step, None when the controller refused
        the job for good (a 4xx that repeating will not change: bad body, bad token)."""
        with self._lock:
            put, job, version = self._need_put, dict(self._job), self._version
        path = self.controller.job_path(self.name)
        try:
            reply = self.controller.call("PUT", path, job) if put else self.controller.call("POST", path + "/renew")
        except UnreachableError as exc:
            if not self._outage:
                self._outage = True
                self.log.warning(
                    "mlroute: controller %s unreachable (%s): job %s runs undeclared, retrying in the background",
                    self.controller.url, exc, self.name)
            with self._lock:  # its first answer may come from a controller restarted without the job (or one
                self._need_put = True  # that kept it): either way the next call declares it again, at once
            return self._retry()
        if reply.ok:
            self._failures = 0
            if put:
                with self._lock:
                    self._need_put = version != self._version
                if self._outage:
                    self.log.warning("mlroute: controller %s reachable again: job %s declared%s", self.controller.url,
                                     self.name, " again, with the same rings" if self._declared_once else "")
                self._outage = False
                self.declared = self._declared_once = True
            return 0.0 if self._need_put else self.interval_s
        if not put and reply.status == 404:
            if not self._lost_logged:
                self._lost_logged = True
                self.log.warning("mlroute: controller lost job %s (renew answered 404): declaring it again", self.name)
            with self._lock:
                self._need_put = True
            self.declared = False
            return 0.0
        if _retryable(reply.status):
            return self._retry()
        self.declared = False
        self.log.error("mlroute: controller refused job %s (%s %s): %d %s", self.name, "PUT" if put else "renew",
                       path, reply.status, reply.text.strip()[:300])
        return None

    def _retry(self) -> float:
        """The next delay after a failure: doubling from the first, at most the longest, and never more than the
        renew interval (a longer wait would let the lease run out after the controller is back)."""
        self._failures += 1
        first, longest = self.backoff
        return float(min(longest, first * 2 ** (self._failures - 1), self.interval_s))

    def _run(self, delay: float) -> None:
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                next_delay = self.step()
            except Exception:  # never let a bug here take the training process down with a thread traceback
                self.log.exception("mlroute: lease thread of job %s failed", self.name)
                return
            if next_delay is None:
                return
            delay = next_delay

    def end(self, timeout_s: float | None = None) -> None:
        """Stop renewing and DELETE the job if the controller ever accepted it (idempotent; at exit, at
        destroy_process_group, on SIGTERM). A PUT whose answer was lost leaves a job only until its lease ends."""
        if self.ended:
            return
        self.ended = True
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s if timeout_s is not None else self.controller.timeout_s + 0.5)
        if not self._declared_once:
            return
        try:
            reply = self.controller.call("DELETE", self.controller.job_path(self.name))
        except UnreachableError as exc:
            self.log.warning("mlroute: could not delete job %s (%s): it ends with its lease", self.name, exc)
            return
        if not reply.ok and reply.status != 404:
            self.log.warning("mlroute: delete of job %s answered %d: it ends with its lease", self.name, reply.status)
        self.declared = False
