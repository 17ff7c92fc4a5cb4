"""The torch side: declare a process group's rings to the controller, before its first collective.

``install()`` wraps ``torch.distributed.init_process_group`` so that, once the default group exists, every rank
publishes its fabric address through the rendezvous store and rank 0 derives the ring the backend will really use
and PUTs the job before init returns (so before any collective puts bytes on the fabric). ``declare()`` does the
same for a group the script names. Rank 0 then renews the lease in a daemon thread and deletes the job at exit,
at ``destroy_process_group`` and on SIGTERM. Nothing here may break training: every failure is logged, and the
job runs on undeclared.

With ``MLROUTE_RING=choose`` the default group is first re-created in the node order the controller chose for the
job's ring (:func:`_in_chosen_order`, mlroute/torch/rank_order.py): ``dist.get_rank()`` answers the new rank on
every rank, and the job declared afterwards is the chosen ring.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import signal
import threading
import urllib.parse
from typing import Any

import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from mlroute.torch import exchange, job, nccl, rank_order
from mlroute.torch.address import fabric_address
from mlroute.torch.client import LOG, Controller, Lease, UnreachableError
from mlroute.torch.rings import gloo_send_order, host_rings, nccl_send_order, unique_rings

GATHER_TIMEOUT_S = 10.0  # ranks leave init_process_group together (it ends with a store barrier): ample
NCCL_WATCH_S = (2.0, 600.0)  # poll the NCCL log every 2 s for up to 10 min: NCCL writes its rings at comm set-up
# every rank waits this long at most for rank 0's answer (its gather, then its PUT, each bounded)
ORDER_TIMEOUT_S = GATHER_TIMEOUT_S + rank_order.CHOOSE_TIMEOUT_S + 10.0

_leases: dict[tuple[int, ...], Lease] = {}
_generations: dict[tuple[int, ...], int] = {}
_orders = 0  # node-order exchanges run by this process (each default group asks once)
_said: set[str] = set()
_lock = threading.RLock()
_exit_hooks = False
_previous_sigterm: Any = None
_original: dict[str, Any] = {}


def _once(key: str, message: str, *args: Any) -> None:
    if key not in _said:
        _said.add(key)
        LOG.warning(message, *args)


def install() -> None:
    """Wrap init_process_group / destroy_process_group under both names scripts reach them by (idempotent)."""
    if _original or not dist.is_available():
        return
    _original["init"] = c10d.init_process_group
    _original["destroy"] = c10d.destroy_process_group

    @functools.wraps(_original["init"])
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = _original["init"](*args, **kwargs)
        init_method = kwargs.get("init_method", args[1] if len(args) > 1 else None)
        if rank_order.wanted(os.environ):
            _in_chosen_order(args, kwargs, init_method)
        _quietly(None, None, init_method)
        return result

    @functools.wraps(_original["destroy"])
    def destroy_process_group(group: Any = None, *args: Any, **kwargs: Any) -> Any:
        ended = _ending(group)
        try:
            return _original["destroy"](group, *args, **kwargs)
        finally:
            for lease in ended:
                lease.end()

    for module in (dist, c10d):
        module.init_process_group = init_process_group  # type: ignore[attr-defined]
        module.destroy_process_group = destroy_process_group  # type: ignore[attr-defined]


def _in_chosen_order(args: tuple[Any, ...], kwargs: dict[str, Any], init_method: str | None) -> None:
    """Re-create the default group with every rank renumbered in the node order the controller chose for the
    job's ring. Collective: rank 0 asks and always publishes an answer (the new rank of every rank, or "keep"),
    every rank reads it, so all re-create the group or none does. The new group meets through the old group's
    own store (under a prefix of its own), so no rendezvous port is opened twice."""
    me, world = dist.get_rank(), dist.get_world_size()
    global _orders
    with _lock:
        generation, _orders = _orders, _orders + 1
    store = c10d._get_default_store()
    prefix = exchange.key_prefix(range(world), generation, kind="order")
    exchange.publish(store, prefix, me, _my_address(init_method))
    if me == 0:
        order: list[int] | None = None
        try:
            order = _chosen_order(exchange.gather(store, prefix, range(world), GATHER_TIMEOUT_S))
        except Exception as exc:  # never leave the other ranks waiting for an answer
            LOG.warning("mlroute: ring choice failed (%s: %s): the job keeps its order", type(exc).__name__, exc)
        exchange.answer(store, prefix, json.dumps(order))
    try:
        order = json.loads(exchange.read_answer(store, prefix, ORDER_TIMEOUT_S))
    except Exception as exc:
        _once("order", "mlroute: no node order from rank 0 (%s): the job keeps its order", exc)
        return
    if not order or order == list(range(world)):
        return
    params = inspect.signature(_original["init"]).bind_partial(*args, **kwargs).arguments
    kept = {k: v for k, v in params.items() if k not in ("backend", "init_method", "world_size", "rank", "store")}
    _original["destroy"]()
    _original["init"](params.get("backend"), store=c10d.PrefixStore(f"{prefix}/group", store), rank=order[me],
                      world_size=world, **kept)
    for var in ("RANK", "ROLE_RANK"):  # what scripts read besides get_rank(); LOCAL_RANK (the device) stays
        if var in os.environ:
            os.environ[var] = str(order[me])
    if "GROUP_RANK" in os.environ and "LOCAL_WORLD_SIZE" in os.environ:
        os.environ["GROUP_RANK"] = str(order[me] // max(1, int(os.environ["LOCAL_WORLD_SIZE"])))
    if me == 0 or order[me] == 0:
        LOG.info("mlroute: rank %d runs as rank %d, in the node order the controller chose", me, order[me])


def _my_address(init_method: str | None) -> str:
    """This rank's fabric address toward the rendezvous (``MASTER_ADDR``, else the init method's host); "" when
    none is known."""
    master = os.environ.get("MASTER_ADDR") or (urllib.parse.urlsplit(init_method).hostname if init_method else None)
    return fabric_address(master, os.environ) or ""


def _chosen_order(hosts: list[str]) -> list[int] | None:
    """Rank 0's side: the new rank of every rank, from the controller's choice for the job's hosts (``hosts``: each
    global rank's fabric address); None (keep the order) when there is nothing to choose or no answer."""
    env = os.environ
    blocks = rank_order.node_blocks(hosts)
    url, base = env.get("MLROUTE_URL"), job.base_name(env)
    if blocks is not None and all(hosts) and len(blocks) < 3:
        LOG.info("mlroute: MLROUTE_RING=choose: fewer than 3 hosts, every order is the same ring")
        return None
    if not all(hosts) or blocks is None or not url or not base:
        why = ("a rank knows no route to the master" if not all(hosts) else
               "a host's ranks are not one block" if blocks is None else
               "MLROUTE_URL is not set" if not url else "no job name")
        LOG.warning("mlroute: MLROUTE_RING=choose: %s; the job keeps its order", why)
        return None
    controller = Controller(url, env.get("MLROUTE_TOKEN") or None)
    name = job.group_name(base, range(len(hosts)), len(hosts))
    body = rank_order.choose_body(blocks, job.lease_seconds(env), job.weight(env))
    try:
        reply, answer = rank_order.ask(controller, name, body)
    except UnreachableError as exc:
        LOG.warning("mlroute: controller %s unreachable (%s): the job keeps its order", controller.url, exc)
        return None
    chosen = rank_order.node_ranks(answer, blocks)
    if chosen is None:
        LOG.warning("mlroute: the controller chose no order for job %s (%d %s): it keeps its order", name,
                    reply.status, reply.text.strip()[:200])
        return None
    choice = answer["job"].get("ring_choice") or {}
    LOG.info("mlroute: job %s runs in the node order %s (%s)", name, sorted(chosen, key=chosen.__getitem__),
             choice.get("reason") or f"estimated gain {choice.get('gain')}")
    return rank_order.new_ranks(blocks, chosen)


def _quietly(group: Any, name: str | None, init_method: str | None) -> dict[str, Any] | None:
    try:
        return _declare(group, name, init_method)
    except Exception as exc:  # a hook that breaks training is worse than no hook
        LOG.warning("mlroute: could not declare the job (%s: %s); it runs undeclared", type(exc).__name__, exc)
        return None


def declare(group: Any = None, name: str | None = None) -> dict[str, Any] | None:
    """Declare ``group`` (default: the default group) as job ``name`` (default: MLROUTE_JOB / torchrun's run id,
    suffixed for a sub-group). Call it on every member of the group, like a collective, before the group's first
    collective. Returns the body PUT on the group's first rank, None elsewhere or when nothing was declared."""
    return _quietly(group, name, None)


def group_ranks(group: Any) -> list[int]:
    """The group's global ranks in group-rank order: the order its ring follows (new_group sorts the ranks)."""
    if group is None or group is c10d.GroupMember.WORLD:
        return list(range(dist.get_world_size()))
    if hasattr(dist, "get_process_group_ranks"):
        return list(dist.get_process_group_ranks(group))
    mapping = c10d._pg_group_ranks[group]  # global rank -> group rank
    return sorted(mapping, key=mapping.get)


def _declare(group: Any, name: str | None, init_method: str | None) -> dict[str, Any] | None:
    if not dist.is_initialized():
        _once("init", "mlroute: declare() before init_process_group: nothing to declare")
        return None
    ranks = group_ranks(group)
    me = dist.get_rank()
    if me not in ranks:
        return None
    env = os.environ
    with _lock:
        key = tuple(ranks)
        generation = _generations.get(key, 0)
        _generations[key] = generation + 1
    prefix = exchange.key_prefix(ranks, generation)
    store = c10d._get_default_store()
    mine = {"addr": _my_address(init_method), "dev": int(env.get("LOCAL_RANK", "0") or 0)}
    exchange.publish(store, prefix, me, json.dumps(mine))
    if me != ranks[0]:
        return None
    members = [json.loads(v) for v in exchange.gather(store, prefix, ranks, GATHER_TIMEOUT_S)]
    hosts = [m["addr"] for m in members]
    if not all(hosts):
        missing = [r for r, h in zip(ranks, hosts) if not h]
        _once("addr", "mlroute: ranks %s know no route to the master (set MLROUTE_ADDR): job not declared", missing)
        return None
    backend = _library(group)
    if backend is None:
        _once("backend", "mlroute: backend %s: its ring is unknown, job not declared", dist.get_backend(group))
        return None
    if backend == "nccl":
        rank_rings = nccl.rank_rings(env, hosts, [m["dev"] for m in members]) or [nccl_send_order(len(hosts))]
    else:
        rank_rings = [gloo_send_order(len(hosts))]
    rings = unique_rings(r for ring in rank_rings for r in host_rings(ring, hosts))
    if not rings:
        LOG.info("mlroute: every rank on one host (%s): no fabric traffic to declare", hosts[0])
        return None
    url = env.get("MLROUTE_URL")
    base = job.base_name(env)
    if not url or not base:
        _once("url", "mlroute: %s is not set: job not declared", "MLROUTE_URL" if not url else "MLROUTE_JOB")
        return None
    name = job.clean(name) if name else job.group_name(base, ranks, dist.get_world_size())
    payload = job.body(hosts, rings, env)
    lease = _lease(key, name, payload, env)
    if backend == "nccl":
        _watch_nccl(lease, hosts, [m["dev"] for m in members])
    return payload


def _library(group: Any) -> str | None:
    """gloo or nccl: the library whose ring the group's all-reduce runs. A 2.x group with both (``cpu:gloo,
    cuda:nccl``) runs NCCL when training on GPUs, which is what a job with CUDA is taken to do."""
    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend and ("gloo" not in backend or _cuda()):
        return "nccl"
    return "gloo" if "gloo" in backend else None


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _lease(key: tuple[int, ...], name: str, payload: dict[str, Any], env: Any) -> Lease:
    """Start (or re-aim) the lease of a group's job and make sure it ends with the process."""
    with _lock:
        old = _leases.get(key)
        if old is not None and not old.ended and old.name == name:
            old.redeclare(payload)
            return old
        if old is not None:
            old.end()
        controller = Controller(env["MLROUTE_URL"], env.get("MLROUTE_TOKEN") or None)
        lease = Lease(controller, name, payload, job.lease_seconds(env))
        _leases[key] = lease
    _exit_hooks_installed()
    lease.start()
    return lease


def _watch_nccl(lease: Lease, hosts: list[str], devices: list[int]) -> None:
    """Re-declare with NCCL's own rings once its log or graph dump shows them (it writes them at comm set-up,
    usually the first collective)."""
    every, limit = NCCL_WATCH_S

    def watch() -> None:
        for _ in range(int(limit / every)):
            if lease.ended:
                return
            found = nccl.rank_rings(os.environ, hosts, devices)
            if found:
                rings = unique_rings(r for ring in found for r in host_rings(ring, hosts))
                if rings and rings != lease.job["rings"]:
                    LOG.info("mlroute: NCCL's rings for job %s: %s", lease.name, rings)
                    lease.redeclare({**lease.job, "rings": rings})
                return
            threading.Event().wait(every)

    threading.Thread(target=watch, name=f"mlroute-nccl-{lease.name}", daemon=True).start()


def _ending(group: Any) -> list[Lease]:
    """The leases a destroy_process_group(group) ends: all of them for the default group (it takes every group
    with it), else that group's. Read before destroying: the group's ranks are gone afterwards."""
    with _lock:
        if group is None or group is c10d.GroupMember.WORLD:
            return list(_leases.values())
        try:
            key = tuple(group_ranks(group))
        except Exception:
            return []
        return [_leases[key]] if key in _leases else []


def end_all() -> None:
    """Delete every job this process declared (idempotent)."""
    with _lock:
        leases = list(_leases.values())
    for lease in leases:
        lease.end()


def _on_sigterm(signum: int, frame: Any) -> None:
    """Delete the jobs, then do what SIGTERM did before us: the previous handler, or die of the signal."""
    end_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _exit_hooks_installed() -> None:
    global _exit_hooks, _previous_sigterm
    with _lock:
        if _exit_hooks:
            return
        _exit_hooks = True
    atexit.register(end_all)
    if threading.current_thread() is threading.main_thread():
        _previous_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
