"""The web view's server side, Ryu-free: the static files shipped in ``controller/web/static`` and the small
configuration the page needs (poll period, whether mutating calls are possible).

The page is served by the controller's own WSGI server (no CDN, no second process), so it works on an
offline management network; rest.py maps ``/``, ``/mlroute/ui`` and ``/mlroute/ui/<file>`` onto
``static_asset``.
"""

from pathlib import Path

STATIC_DIR = Path(__file__).with_name("static")
INDEX = "index.html"
CONTENT_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def static_asset(name: str = INDEX, root: Path = STATIC_DIR) -> tuple[bytes, str] | None:
    """The bytes and content type of one file directly inside ``root``, or None.

    Only plain names of known types are served (no sub-paths, no dot files): a request can never read
    anything outside the folder, whatever it contains.
    """
    name = name or INDEX
    if "/" in name or "\\" in name or name.startswith(".") or "\0" in name:
        return None
    path = root / name
    content_type = CONTENT_TYPES.get(path.suffix)
    if content_type is None or not path.is_file():
        return None
    return path.read_bytes(), content_type


def ui_config(config: dict, objective: str) -> dict:
    """``GET /mlroute/ui-config``: what the page needs to refresh and to offer its buttons."""
    te = config["te"]
    return {
        "poll_interval_s": te["poll_interval_s"],
        "mode": te["mode"],
        "objective": objective,
        "objectives": ["flow", "job"],
        "mutations_enabled": bool(config["rest"]["token"]),
        "fabric_link_bps": (te["fabric_link_mbps"] or te["host_link_mbps"]) * 1e6,
    }
