import importlib.util
import subprocess
import sys

import pytest

from controller.southbound import platform_fixes

RYU_SNIPPET = """class _AlreadyHandledResponse(Response):
    # XXX: Eventlet API should not be used directly.
    from eventlet.wsgi import ALREADY_HANDLED
    _ALREADY_HANDLED = ALREADY_HANDLED
"""


def test_fix_guards_the_import_keeping_its_indentation_and_is_idempotent():
    fixed = platform_fixes.patch_ryu_wsgi_source(RYU_SNIPPET)
    namespace = {"Response": object}
    exec(compile(fixed, "wsgi.py", "exec"), namespace)  # valid Python, and runs without ALREADY_HANDLED
    assert namespace["_AlreadyHandledResponse"]._ALREADY_HANDLED is not None
    assert platform_fixes.patch_ryu_wsgi_source(fixed) == fixed


def test_unknown_ryu_source_fails_loudly():
    with pytest.raises(ValueError, match="ALREADY_HANDLED"):
        platform_fixes.patch_ryu_wsgi_source("print('hello')\n")


@pytest.mark.skipif(importlib.util.find_spec("ryu") is None, reason="Ryu is not installed (the os-ken venv)")
def test_installed_ryu_is_fixed_and_ryu_manager_imports():
    assert platform_fixes.apply() is False  # set-up already applied it
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", "import ryu.app.wsgi, ryu.cmd.manager"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
