"""The REST API and /metrics on Ryu's WSGI server: each handler asks the core for a view or a decision.

Mutating calls (POST) need ``Authorization: Bearer <rest.token>``; with no token configured they are refused.
"""

from __future__ import annotations

import json
import logging

from ryu.app.wsgi import ControllerBase, route
from webob import Response

from controller import rest_input, webui

LOG = logging.getLogger("mlroute")


class RestController(ControllerBase):
    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.app = data["app"]
        self.core = self.app.core

    @route("mlroute", "/mlroute/topology", methods=["GET"])
    def get_topology(self, req, **kwargs):
        return _json(self.core.topology_json())

    @route("mlroute", "/mlroute/elephants", methods=["GET"])
    def get_elephants(self, req, **kwargs):
        return _json(self.core.elephants_json())

    @route("mlroute", "/mlroute/routing", methods=["GET"])
    def get_routing(self, req, **kwargs):
        return _json(self.core.routing_json())

    @route("mlroute", "/mlroute/links", methods=["GET"])
    def get_links(self, req, **kwargs):
        return _json(self.app.links_json())

    @route("mlroute", "/mlroute/ui-config", methods=["GET"])
    def get_ui_config(self, req, **kwargs):
        return _json(webui.ui_config(self.core.config, self.core.te.objective))

    @route("mlroute", "/", methods=["GET"])
    def get_root(self, req, **kwargs):
        return _static(webui.INDEX)

    @route("mlroute", "/mlroute/ui", methods=["GET"])
    def get_ui(self, req, **kwargs):
        return _static(webui.INDEX)

    @route("mlroute", "/mlroute/ui/{name}", methods=["GET"])
    def get_ui_asset(self, req, name, **kwargs):
        return _static(name)

    @route("mlroute", "/mlroute/jobs", methods=["GET"])
    def get_jobs(self, req, **kwargs):
        return _json({"jobs": self.core.jobs})

    @route("mlroute", "/mlroute/jobs", methods=["POST"])
    def post_jobs(self, req, **kwargs):
        denied = self._authorise(req)
        if denied:
            return denied
        jobs, error = rest_input.parse_jobs(req.content_length, req.body_file.read)  # bounded, all or nothing
        if error is not None:
            return _json(error[1], error[0])
        self.core.set_jobs(jobs)  # a job event: ended jobs' flows leave, a decision follows at once
        LOG.info("jobs set over REST: %s", ", ".join(j["name"] for j in jobs) or "none")
        self.app.wake()
        return _json({"jobs": jobs})

    @route("mlroute", "/mlroute/recompute", methods=["POST"])
    def post_recompute(self, req, **kwargs):
        denied = self._authorise(req)
        if denied:
            return denied
        result = self.core.te_step(wait=True)
        self.app.wake()
        return _json({"applied": result.applied, "reason": result.reason, "moved": len(result.moved),
                      "elephants": result.elephants, "optimiser_ms": 1e3 * result.runtime_s})

    @route("mlroute", "/mlroute/objective", methods=["POST"])
    def post_objective(self, req, **kwargs):
        """Switch the TE objective (flow- or job-level leximin); the next decision uses it."""
        denied = self._authorise(req)
        if denied:
            return denied
        body, error = rest_input.parse_json(req.content_length, req.body_file.read)
        if error is not None:
            return _json(error[1], error[0])
        objective = body.get("objective") if isinstance(body, dict) and len(body) == 1 else None
        if objective not in ("flow", "job"):
            return _json({"error": "body must be {\"objective\": \"flow\" or \"job\"}"}, 400)
        self.core.te.objective = objective
        LOG.info("objective set over REST: %s", objective)
        return _json({"objective": objective})

    def _authorise(self, req):
        token = self.core.config["rest"]["token"]
        if not token:
            return _json({"error": "mutating calls are disabled: set rest.token in the configuration"}, 403)
        given = req.headers.get("Authorization", "")
        if given != f"Bearer {token}" and req.headers.get("X-Auth-Token") != token:
            return _json({"error": "missing or wrong token (Authorization: Bearer <rest.token>)"}, 401)
        return None

    @route("mlroute", "/metrics", methods=["GET"])
    def get_metrics(self, req, **kwargs):
        body, content_type = self.core.metrics.exposition()
        return Response(body=body, content_type=content_type.split(";")[0], charset="utf-8")


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
