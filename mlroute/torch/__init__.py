"""Training jobs that declare themselves: a PyTorch job tells the mlroute controller its ring before iteration 0.

Run the training script unchanged through the hook::

    MLROUTE_URL=http://controller:8080 MLROUTE_TOKEN=... torchrun --nproc_per_node 4 ... -m mlroute.torch train.py

or call :func:`declare` after building a group. docs/jobs-hook.md has the environment variables and why each ring
runs the way it does. This package imports only the standard library and torch, and torch only when a job is
declared (the ring derivation and the client run anywhere), so it installs into any training environment.
"""

from __future__ import annotations

from typing import Any


def declare(group: Any = None, name: str | None = None) -> dict[str, Any] | None:
    """Declare ``group`` (default: the default group) to the controller; see :func:`mlroute.torch.hook.declare`."""
    from mlroute.torch.hook import declare as _declare

    return _declare(group, name)


def install() -> None:
    """Declare the default group whenever init_process_group creates it; see :func:`mlroute.torch.hook.install`."""
    from mlroute.torch.hook import install as _install

    _install()


__all__ = ["declare", "install"]
