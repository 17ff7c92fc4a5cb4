"""Every fake switch a controller test drove ends without violations: nothing a real switch would refuse or undo
(tests/fakeswitch.py: a goto backwards, a missing group named, a group added twice or modified missing, a group
deleted under its flows). An app made without a configuration file keeps its declared jobs in the working
directory (controller/state/job_state_file.py): each test runs in its own, so none restores another's jobs."""

import pytest

from tests.fakeswitch import FakeSwitch


@pytest.fixture(autouse=True)
def switches_never_refuse():
    FakeSwitch.made.clear()
    yield
    violations = [v for sw in FakeSwitch.made for v in sw.violations]
    FakeSwitch.made.clear()
    assert not violations, violations


@pytest.fixture(autouse=True)
def own_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
