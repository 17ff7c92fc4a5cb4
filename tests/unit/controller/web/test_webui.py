import re

import pytest

from controller import config as mlconfig
from controller.web.webui import STATIC_DIR, static_asset, ui_config


def test_the_index_and_every_asset_it_references_are_served_with_their_types():
    body, content_type = static_asset()
    assert content_type == "text/html" and b"<svg id=\"fabric\"" in body
    referenced = re.findall(r'(?:src|href)="/mlroute/ui/([^"]+)"', body.decode())
    assert sorted(referenced) == ["app.js", "style.css"]
    assert static_asset("app.js")[1] == "text/javascript" and static_asset("style.css")[1] == "text/css"


@pytest.mark.parametrize("name", ["../config.py", "..", "static/index.html", ".hidden.js", "x\0.js",
                                  "webui.py", "missing.js", "/etc/passwd"])
def test_nothing_outside_the_static_folder_or_of_an_unknown_type_is_served(name):
    assert static_asset(name) is None


def test_a_file_of_a_known_type_outside_the_package_folder_is_not_reachable(tmp_path):
    (tmp_path / "inner").mkdir()
    (tmp_path / "secret.css").write_text("x")
    assert static_asset("../secret.css", root=tmp_path / "inner") is None
    assert static_asset("secret.css", root=tmp_path) == (b"x", "text/css")


def test_the_page_loads_nothing_from_outside_the_controller():
    """Offline use: no CDN, no remote fonts; the page only fetches the controller's own /mlroute/ views."""
    for path in STATIC_DIR.iterdir():
        text = path.read_text()
        assert not re.search(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', text), path.name
        assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", text), path.name
        assert "@import" not in text, path.name
    js = (STATIC_DIR / "app.js").read_text()
    fetched = re.findall(r"(?:getJSON|post)\(\s*[`\"']([^`\"']+)", js)
    assert fetched and all(p.startswith("/mlroute/") for p in fetched), fetched


def test_ui_config_gives_the_poll_period_and_whether_buttons_can_work():
    cfg = mlconfig.parse("te:\n  poll_interval_s: 1.5\n  host_link_mbps: 10\n")
    assert ui_config(cfg, "flow") == {"poll_interval_s": 1.5, "mode": "mlroute", "objective": "flow",
                                      "objectives": ["flow", "job"], "mutations_enabled": False,
                                      "fabric_link_bps": 10e6}
    cfg = mlconfig.parse("rest:\n  token: s3cret\nte:\n  fabric_link_mbps: 40\n")
    out = ui_config(cfg, "job")
    assert out["mutations_enabled"] is True and out["fabric_link_bps"] == 40e6 and out["objective"] == "job"
