"""The REST API and /metrics as a plain WSGI application: each handler asks the core for a view or a decision.

Framework-free: controller/southbound/framework.py mounts it on Ryu's WSGI server under Ryu and serves it with
controller/southbound/http_server.py under os-ken. Under native threads each call holds the core's turn
(``southbound.serialised``) except while it reads a body or waits for its decision.

Mutating calls (POST, PUT, DELETE) are rate-limited per client address (``rest.post_rate_per_s`` / ``rest.post_burst``:
429 with ``Retry-After``) and need ``Authorization: Bearer <rest.token>``; with no token configured they are
refused. A decision is *requested* (controller/decide/decision_requests.py), never taken here: the caller waits for the
decision it joined, or gets 503 with ``Retry-After`` when that would take longer than
``rest.max_decision_wait_s``. Any exception in a handler is a JSON 500 with an error id (the traceback is in
the log under it). Bodies are read within ``rest.client_timeout_s`` (408 otherwise).
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

import webob.exc
from webob import Request, Response

from controller.decide import job_rings
from controller.decide.decision_requests import Refusal, retry_after
from controller.southbound import framework as southbound
from controller.web import job_edits, rest_input, webui
from controller.web.rest_limits import internal_error

LOG = logging.getLogger("mlroute")


ROUTES: list[tuple[str, str, str]] = []  # (method, path template, handler name), in Ryu's routes syntax


def route(method: str, path: str):
    """Register the decorated handler for ``method`` on ``path`` (``{name}`` matches one path segment)."""
    def mark(fn):
        ROUTES.append((method, path, fn.__name__))
        return fn
    return mark


def _pattern(path: str) -> re.Pattern:
    return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path)) + "$")


class RestController:
    """The WSGI application: ``RestController(app)`` where ``app`` is the running MlrouteApp."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._routes = [(method, _pattern(path), getattr(self, name)) for method, path, name in ROUTES]

    @property
    def core(self) -> Any:
        """The app's core in force, read at each call: a cluster node that steps down starts over with a new one
        (kept from start-up, a re-elected leader answered from the core it had before, and waits for decisions
        nobody took)."""
        return self.app.core

    @staticmethod
    def paths() -> list[tuple[str, str]]:
        """(method, path template) of every route, for the framework's router."""
        return [(method, path) for method, path, _ in ROUTES]

    def __call__(self, environ, start_response):
        return self.respond(Request(environ))(environ, start_response)

    def respond(self, req: Request) -> Any:
        for method, pattern, handler in self._routes:
            found = pattern.match(req.path_info or "/")
            if found and req.method == method:
                return southbound.serialised(self._answer)(handler, req, found.groupdict())
        return webob.exc.HTTPNotFound()  # what Ryu's router answers for a path or method no route takes

    def _answer(self, handler, req, kwargs):
        try:
            return handler(req, **kwargs)
        except TimeoutError:  # a body not sent within rest.client_timeout_s (as a whole, or one read)
            limit = self.core.config["rest"]["client_timeout_s"]
            return _json({"error": f"request body not received within {limit:g} s"}, 408)
        except Exception:  # never a traceback in an answer: an id to find it in the log
            self.core.metrics.rest_errors.inc()
            return _json(internal_error(LOG, f"{req.method} {req.path}"), 500)

    def _read(self, req):
        """The body's ``read`` for rest_input, bounded in time as a whole (a trickling body is cut off)."""
        deadline = time.monotonic() + self.core.config["rest"]["client_timeout_s"]
        sock = req.environ.get("mlroute.socket")

        def read(size):
            with southbound.deadline(deadline - time.monotonic(), sock):
                return req.body_file.read(size)
        return read

    @route("GET", "/mlroute/topology")
    def get_topology(self, req, **kwargs):
        return _json(self.core.topology_json())

    @route("GET", "/mlroute/elephants")
    def get_elephants(self, req, **kwargs):
        return _json(self.core.elephants_json())

    @route("GET", "/mlroute/routing")
    def get_routing(self, req, **kwargs):
        return _json(self.core.routing_json())

    @route("GET", "/mlroute/links")
    def get_links(self, req, **kwargs):
        return _json(self.app.links_json())

    @route("GET", "/mlroute/switches")
    def get_switches(self, req, **kwargs):
        """Per switch: its description, tables (entries, mlroute's, capacity), groups, errors, audit."""
        return _json({"switches": self.core.switches_json()})

    @route("GET", "/mlroute/ui-config")
    def get_ui_config(self, req, **kwargs):
        return _json(webui.ui_config(self.core.config, self.core.te.objective))

    @route("GET", "/")
    def get_root(self, req, **kwargs):
        return _static(webui.INDEX)

    @route("GET", "/mlroute/ui")
    def get_ui(self, req, **kwargs):
        return _static(webui.INDEX)

    @route("GET", "/mlroute/ui/{name}")
    def get_ui_asset(self, req, name, **kwargs):
        return _static(name)

    @route("GET", "/mlroute/jobs")
    def get_jobs(self, req, **kwargs):
        """Every declared job; one with a lease shows ``lease_s`` and ``expires_in_s``."""
        return _json({"jobs": [self.core.leases.shown(job) for job in self.core.jobs]})

    @route("POST", "/mlroute/jobs")
    def post_jobs(self, req, **kwargs):
        """Replace the declared jobs (all or nothing) and answer once the decision they trigger ended and its rules
        are confirmed by the switches (its outcome as ``decision``; null if it did not end within
        ``rest.max_decision_wait_s``)."""
        denied = self._authorise(req)
        if denied:
            return denied
        jobs, error = rest_input.parse_jobs(req.content_length, self._read(req))  # bounded, all or nothing
        if error is not None:
            return _json(error[1], error[0])
        if self._clustered():
            return self._stored("jobs", jobs)
        LOG.info("jobs set over REST: %s", ", ".join(j["name"] for j in jobs) or "none")
        return self._in_force(jobs, {"jobs": jobs}, "jobs set")

    @route("GET", "/mlroute/jobs/{name}")
    def get_job(self, req, name, **kwargs):
        bad = rest_input.job_name(name)
        if bad is not None:
            return _json(bad[1], bad[0])
        job = job_edits.named(self.core.jobs, name)
        if job is None:
            return _json({"error": f"no job named {name!r}"}, 404)
        return _json({"job": self.core.leases.shown(job)})

    @route("PUT", "/mlroute/jobs/{name}")
    def put_job(self, req, name, **kwargs):
        """Declare (or replace) one job, with an optional lease; the other jobs stay. Answered like the all-jobs
        POST: once the decision it triggers ended (200), or stored in ZooKeeper on a cluster (202). With
        ``choose_ring`` the job is declared with the ring the controller chose (its ``node_ranks`` and
        ``ring_choice`` in the answer)."""
        denied = self._authorise(req)
        if denied:
            return denied
        parsed, error = rest_input.parse_job(name, req.content_length, self._read(req))
        if error is not None:
            return _json(error[1], error[0])
        job, lease_s, ring = parsed
        if ring is not None:  # the ring chosen on the fabric and jobs in force (controller/decide/job_rings.py)
            job = job_rings.choose(job, ring, self.core.fabric(), self.core.jobs,
                                   [st.key for st in self.core.monitor.elephants()], algo=self.core.te.mode,
                                   seed=self.core.te.seed)
        jobs, answer = self._edit(lambda now: job_edits.put(now, job, lease_s, self.core.leases))
        if jobs is None:
            return answer
        shown = self.core.leases.shown(job_edits.named(jobs, name) or job)
        if self._clustered():
            return self._stored_job({"job": shown})
        LOG.info("job %s declared over REST (lease %s s)", name, "none" if lease_s is None else f"{lease_s:g}")
        return self._in_force(jobs, {"job": shown}, f"job {name} declared")

    @route("DELETE", "/mlroute/jobs/{name}")
    def delete_job(self, req, name, **kwargs):
        """End one job (404 if there is none): its flows leave and a decision follows, as for the all-jobs POST."""
        denied = self._authorise(req) or self._bad_name(name)
        if denied:
            return denied
        jobs, answer = self._edit(lambda now: job_edits.delete(now, name))
        if jobs is None:
            return answer
        if self._clustered():
            return self._stored_job({"deleted": name})
        LOG.info("job %s deleted over REST", name)
        return self._in_force(jobs, {"deleted": name}, f"job {name} deleted")

    @route("POST", "/mlroute/jobs/{name}/renew")
    def renew_job(self, req, name, **kwargs):
        """Run one job's lease again from now (404: no such job, or its lease ran out: declare it again). No
        decision: nothing routed changes."""
        denied = self._authorise(req) or self._bad_name(name)
        if denied:
            return denied
        jobs, answer = self._edit(lambda now: job_edits.renew(now, name, self.core.leases))
        if jobs is None:
            return answer
        shown = {"job": self.core.leases.shown(job_edits.named(jobs, name) or {"name": name})}
        if self._clustered():
            return self._stored_job(shown, decided=False)
        self.core.jobs = jobs  # only an expiry moved: nothing to route again
        return _json(shown)

    def _bad_name(self, name):
        bad = rest_input.job_name(name)
        return None if bad is None else _json(bad[1], bad[0])

    def _edit(self, edit):
        """A per-job edit (controller/web/job_edits.py) on the job list as it is: (the new list, None), or (None,
        the 4xx answer) with nothing changed. A cluster: ZooKeeper's compare-and-set, so a concurrent change of
        another job on any node is kept (no jobs stored yet: this node's configured ones are the start)."""
        try:
            if self._clustered():
                start = list(self.core.jobs)
                return self.app.cluster_update("jobs", lambda stored: edit(start if stored is None else stored)), None
            return edit(self.core.jobs), None
        except job_edits.RefusedError as refused:
            return None, _json({"error": refused.message}, refused.status)

    def _in_force(self, jobs, answer, event):
        """One controller: the edited list in force, the decision it triggers (urgent: a job event, decided at
        once, coalesced; a refusal changes nothing) and that decision's rules confirmed by the switches waited
        for, ``rest.max_decision_wait_s`` in all. A job that starts sending when its PUT is answered finds its
        paths installed (``in_force``: false when the switches had not confirmed them in time)."""
        asked = time.monotonic()
        ticket = self.core.decisions.request(urgent=True)
        if isinstance(ticket, Refusal):
            return self._refused(ticket)
        self.core.set_jobs(jobs)  # ended jobs' flows leave now; the decision starts on the new set
        outcome = self._wait(ticket)
        if isinstance(outcome, Refusal):
            return _json(dict(answer, decision=None))
        decision = _decision_json(outcome)
        decided = time.monotonic()
        left = self.core.config["rest"]["max_decision_wait_s"] - (decided - asked)
        decision["in_force"] = self.app.wait_in_force(ticket.decision.sync_round, left)
        decision["in_force_ms"] = round(1e3 * (time.monotonic() - decided), 1)
        self.core.metrics.job_rules_confirmed.labels(str(decision["in_force"]).lower()).observe(
            decision["in_force_ms"] / 1e3)
        LOG.info("%s: decision %s, its rules %s by the switches %.0f ms after it", event,
                 "applied" if outcome.applied else "kept", "confirmed" if decision["in_force"] else "not all confirmed",
                 decision["in_force_ms"])
        return _json(dict(answer, decision=decision))

    def _stored_job(self, answer, decided=True):
        """A cluster: the edit is in ZooKeeper, every node's watch applies it and the leader routes it (202: not
        yet applied); a renew is complete once stored (200)."""
        leader = (self.app.cluster_json().get("leader") or {}).get("id")
        answer = dict(answer, cluster={"stored": True, "leader": leader})
        return _json(dict(answer, decision=None), 202) if decided else _json(answer)

    @route("POST", "/mlroute/recompute")
    def post_recompute(self, req, **kwargs):
        """A decision now: the one this call joins (coalesced with every other request), or 503."""
        denied = self._authorise(req)
        if denied:
            return denied
        ticket = self.core.decisions.request(urgent=False)  # callers' decisions are spaced (min_interval_s)
        answer = ticket if isinstance(ticket, Refusal) else self._wait(ticket)
        return self._refused(answer) if isinstance(answer, Refusal) else _json(_decision_json(answer))

    def _wait(self, ticket):
        """The decision loop is told; the decision's result, or a Refusal when it did not end in time."""
        self.app.wake(decide=True)
        with southbound.unlocked():  # the decision loop needs the turn to take the decision
            ended = ticket.wait(self.core.config["rest"]["max_decision_wait_s"])
        if ended:
            return ticket.outcome
        return self.core.decisions.timed_out(ticket)

    def _refused(self, refusal, why="busy"):
        self.core.metrics.rest_refused.labels(why).inc()
        response = _json({"error": refusal.reason, "retry_after_s": refusal.retry_after_s}, refusal.status)
        response.headers["Retry-After"] = str(refusal.retry_after_s)
        return response

    @route("POST", "/mlroute/objective")
    def post_objective(self, req, **kwargs):
        """Switch the TE objective (flow- or job-level leximin); the next decision uses it."""
        denied = self._authorise(req)
        if denied:
            return denied
        body, error = rest_input.parse_json(req.content_length, self._read(req))
        if error is not None:
            return _json(error[1], error[0])
        objective = body.get("objective") if isinstance(body, dict) and len(body) == 1 else None
        if objective not in ("flow", "job"):
            return _json({"error": "body must be {\"objective\": \"flow\" or \"job\"}"}, 400)
        if self._clustered():
            return self._stored("objective", objective)
        self.core.te.objective = objective
        LOG.info("objective set over REST: %s", objective)
        return _json({"objective": objective})

    def _clustered(self):
        return getattr(self.app, "roles", None) is not None

    def _stored(self, key, value):
        """A cluster: the write goes to ZooKeeper and the leader applies it (202: accepted, not yet applied)."""
        self.app.cluster_put(key, value)
        LOG.info("%s stored in ZooKeeper over REST", key)
        leader = (self.app.cluster_json().get("leader") or {}).get("id")
        return _json({key: value, "decision": None, "cluster": {"stored": True, "leader": leader}}, 202)

    @route("GET", "/mlroute/cluster")
    def get_cluster(self, req, **kwargs):
        """This node's role, the leader, the generation, the members and each switch's role (every node)."""
        return _json(self.app.cluster_json())

    def _authorise(self, req):
        """A refusal for a mutating call that may not go on (rate limit first: it counts unauthorised calls too)."""
        wait = self.app.post_limit.admit(req.remote_addr or "")
        if wait:
            rest = self.core.config["rest"]
            return self._refused(Refusal(429, retry_after(wait), f"too many mutating calls (POST / PUT / DELETE) from "
                                         f"this client: at most {rest['post_rate_per_s']:g}/s (burst "
                                         f"{rest['post_burst']})"), "rate_limited")
        token = self.core.config["rest"]["token"]
        if not token:
            return _json({"error": "mutating calls are disabled: set rest.token in the configuration"}, 403)
        given = req.headers.get("Authorization", "")
        if given != f"Bearer {token}" and req.headers.get("X-Auth-Token") != token:
            return _json({"error": "missing or wrong token (Authorization: Bearer <rest.token>)"}, 401)
        return None

    @route("GET", "/metrics")
    def get_metrics(self, req, **kwargs):
        body, content_type = self.core.metrics.exposition()
        return Response(body=body, content_type=content_type.split(";")[0], charset="utf-8")


def _decision_json(result):
    return {"applied": result.applied, "reason": result.reason, "moved": len(result.moved),
            "elephants": result.elephants, "optimiser_ms": 1e3 * result.runtime_s}


def _static(name):
    found = webui.static_asset(name)
    if found is None:
        return _json({"error": "no such file"}, 404)
    body, content_type = found
    charset = "utf-8" if content_type.startswith("text") else None
    return Response(body=body, content_type=content_type, charset=charset, cache_control="no-cache")


def _json(obj, status=200):
    body = json.dumps(obj, default=_plain).encode()
    return Response(body=body, status=status, content_type="application/json", charset="utf-8")


def _plain(value):
    """numpy scalars and the like, as JSON numbers / lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)
