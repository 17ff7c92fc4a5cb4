"""One node's part in the controller cluster, over ZooKeeper (kazoo): membership, election, the generation, and
the state every node shares (declared jobs, the objective, the leader's warm view).

Znodes under ``/mlroute/<name>``: ``members/<node_id>`` (ephemeral: id and REST address), ``election`` (kazoo's
lock recipe: the holder leads), ``generation`` (a decimal counter that only grows), ``leader`` (ephemeral: who
leads at which generation), ``jobs`` and ``objective`` (written by any node's REST, applied by the leader) and
``view`` (the leader's small summary for the followers: pinned paths, topology counts).

Why these rules:
- The elected node bumps the generation *before* it asks any switch for MASTER, in one transaction that also
  checks its lock node still exists, so a generation is only ever issued to the current lock holder, and the
  switches (OpenFlow 1.3 §6.3.6) refuse whoever holds an older one.
- SUSPENDED (ZooKeeper unreachable) keeps the role: the session may still live, and while ZooKeeper has no
  quorum nobody else can be elected; if the session did expire meanwhile, a newer leader's generation fences
  this one at the switches. LOST (the session expired) steps down at once.
- A leader whose process is gone is replaced at once, not when its session expires: every node serves a
  liveness port (controller/cluster/liveness.py) and the leader publishes it with its lead; a follower with
  proof that the leader's process ended deletes that session's lock node (and its leader node), so the next in
  line takes the lock and bumps the generation. Only the dead session's nodes are deleted (by their ephemeral
  owner), and only on proof, never on silence; docs/cluster.md says why this cannot elect two leaders.
- Callbacks (``Listener``) come from kazoo's handler: green threads under eventlet (Ryu), native threads
  otherwise; the shell makes them take the core's turn.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any, Protocol

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

from controller.cluster.liveness import LivenessServer, LivenessWatch
from controller.cluster.roles import newer

LOG = logging.getLogger("mlroute")

_U64 = 1 << 64
SHARED = ("jobs", "objective", "view")  # the znodes every node watches (Listener.shared)
MAX_LOG_INTERVAL_S = 30.0  # an unreachable ZooKeeper at start: said at doubling intervals up to this
CAMPAIGN_RETRY_S = 0.5  # a campaign that failed unexpectedly starts over after this


class Listener(Protocol):
    """What the coordinator tells its node (from kazoo's handler thread)."""

    def leading(self, generation: int) -> None: ...  # elected; the generation is bumped: ask for MASTER

    def following(self, generation: int | None) -> None: ...  # not (or no longer) the leader

    def shared(self, key: str, value: Any) -> None: ...  # jobs / objective / view changed (None: unset)


def default_handler() -> Any:
    """kazoo's eventlet handler where eventlet has monkey-patched threads (Ryu), its threading handler elsewhere."""
    patcher = sys.modules.get("eventlet.patcher")
    if patcher is not None and patcher.is_monkey_patched("thread"):
        from kazoo.handlers.eventlet import SequentialEventletHandler
        return SequentialEventletHandler()
    from kazoo.handlers.threading import SequentialThreadingHandler
    return SequentialThreadingHandler()


class Coordinator:
    """Membership, election and shared state of one node; ``start`` joins, ``stop`` leaves."""

    def __init__(self, hosts: str, name: str, node_id: str, advertise: str, session_timeout_s: float,
                 listener: Listener, handler: Any = None, clock: Callable[[], float] | None = None,
                 liveness: LivenessServer | None = None, liveness_host: str | None = None) -> None:
        """``liveness``: this process's liveness server (bound already), published while leading as
        ``liveness_host`` (default: its own host) and its port; None: a dead leader waits for its session."""
        self.node_id, self.advertise = node_id, advertise
        self.session_timeout_s = session_timeout_s
        self.liveness = liveness
        self.liveness_address = (f"{liveness_host or liveness.host}:{liveness.port}" if liveness is not None
                                  else None)  # host:port, published with this node's lead
        self._watch: tuple[tuple[Any, ...], LivenessWatch] | None = None  # (what it watches, the watch)
        self.dead_leaders_released = 0  # dead leaders' locks released on proof
        self.base = f"/mlroute/{name}"
        self.listener = listener
        handler = handler or default_handler()
        sleep = handler.sleep_func  # kazoo refuses retries that sleep otherwise than its handler (eventlet: green)
        self.client = KazooClient(hosts=hosts, timeout=session_timeout_s, handler=handler,
                                  connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0,
                                                              sleep_func=sleep),
                                  command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=1.0, sleep_func=sleep))
        self.leading = False
        self.generation: int | None = None  # the newest seen (this node's own while it leads)
        self.leader: dict[str, Any] | None = None
        self.members: dict[str, dict[str, Any]] = {}
        self.state = "connecting"  # connected | suspended | lost | connecting | stopped
        self.leader_changes = 0
        self._stopped = False
        self._deposed = self.client.handler.event_object()
        self._reconnected = self.client.handler.event_object()  # set while a session exists
        self._reconnected.set()
        self._lock: Any = None
        self._clock = clock
        # The leadership transitions and the generation watch's reports happen under one mutex, in order: the
        # watch runs on kazoo's callback thread, the campaign on its own, and without it a watch could report
        # "following G" for the generation this node is taking (its own bump seen before the election returned)
        # or report a newer generation before the campaign's own step-down at the older one.
        self._mutex = self.client.handler.rlock_object()
        self._claim: int | None = None  # the newest generation this node is taking or has taken
        self._taken: int | None = None  # the newest generation this node has taken (led at)
        self._seen: int | None = None  # the newest generation the watch delivered
        self.sessions = 0  # sessions established so far (a new one after each expiry)

    # -- joining and leaving ---------------------------------------------------------------------------------
    def start(self, timeout_s: float | None = 15.0, log_every_s: float = 1.0) -> None:
        """Connect, register as a member, watch the shared state, and campaign. Unreachable ZooKeeper: kazoo
        tries again every second at most while this waits, saying so at doubling intervals (up to 30 s) instead of
        giving up, so a node started before ZooKeeper joins once it answers; ``timeout_s`` None waits for ever,
        else raises the handler's timeout after it."""
        self.client.add_listener(self._session)
        event = self.client.start_async()
        waited, step = 0.0, log_every_s
        while not (event.wait(step) or self.client.connected) and not self._stopped:
            waited += step
            if timeout_s is not None and waited >= timeout_s:
                self.client.stop()
                raise self.client.handler.timeout_exception(f"ZooKeeper not reached within {timeout_s:g} s")
            LOG.warning("cluster: ZooKeeper (%s) not reached for %.0f s; still trying (kazoo: every <= 1 s)",
                        self.client.hosts, waited)
            step = min(2 * step, MAX_LOG_INTERVAL_S)
        if self._stopped:
            return
        self.state = "connected"
        for path in ("members", "shared"):
            self.client.ensure_path(f"{self.base}/{path}")
        self._register()
        self.client.ChildrenWatch(f"{self.base}/members", self._members_changed)
        if self.liveness is not None:
            self.client.handler.spawn(self.liveness.serve)
        self.client.DataWatch(f"{self.base}/generation", self._generation_changed)
        self.client.DataWatch(f"{self.base}/leader", self._leader_changed)
        for key in SHARED:
            self.client.DataWatch(f"{self.base}/shared/{key}", self._shared_watch(key))
        self.client.handler.spawn(self._campaign)

    def stop(self) -> None:
        """Leave the cluster: leadership given up (its ephemeral nodes deleted with the session), client closed."""
        self._stopped = True
        self._deposed.set()
        self._reconnected.set()
        self._unwatch()
        if self._lock is not None:
            self._lock.cancel()
        try:
            self.client.stop()
            self.client.close()
        except KazooException:
            pass
        if self.liveness is not None:
            self.liveness.close()
        self.state = "stopped"

    def _register(self) -> None:
        body = json.dumps({"id": self.node_id, "rest": self.advertise}).encode()
        path = f"{self.base}/members/{self.node_id}"
        try:
            self.client.create(path, body, ephemeral=True)
        except NodeExistsError:  # a previous session's node, not yet expired: ours now
            self.client.delete(path)
            self.client.create(path, body, ephemeral=True)

    def _session(self, state: str) -> None:
        """kazoo's connection-state listener (must not block)."""
        if state == KazooState.LOST:
            self.state = "lost"
            self._reconnected.clear()
            self._deposed.set()  # the campaign steps down at once
        elif state == KazooState.SUSPENDED:
            self.state = "suspended"  # keep the role: see the module's docstring
        elif state == KazooState.CONNECTED:
            lost = self.state == "lost"
            self.state = "connected"
            if lost or self.sessions == 0:
                self.sessions += 1
            if lost and not self._stopped:
                self.client.handler.spawn(self._rejoin)

    def _rejoin(self) -> None:
        """A new session after the old one expired: the member node again, and the campaign goes on."""
        try:
            self._register()
        except KazooException:
            LOG.exception("cluster: could not register again after the session expired")
        self._reconnected.set()

    # -- election --------------------------------------------------------------------------------------------
    def _campaign(self) -> None:
        """Campaign until stopped. It never ends silently: an unexpected exception is logged with its stack, any
        lead is given up (the listener told), and the campaign starts over after a short pause."""
        while not self._stopped:
            try:
                self._term()
            except Exception:
                if self._stopped:
                    return
                LOG.exception("cluster: the campaign failed; campaigning again in %.1f s", CAMPAIGN_RETRY_S)
                self._give_up_lead("campaign failed")
                self._release()
                self.client.handler.sleep_func(CAMPAIGN_RETRY_S)

    def _term(self) -> None:
        """One turn: wait for the lock; holding it, bump the generation and lead until deposed; then let go."""
        self._lock = self.client.Lock(f"{self.base}/election", identifier=self.node_id)
        try:
            self._drop_own_lock_nodes()
            if not self._lock.acquire():
                return
            # Deposed is about the session that holds this lock: a session lost while waiting (kazoo's lock
            # waits on through a new session) set it for the old one. A loss from here on either fails the bump
            # (the lock node is gone) or comes after it, and then it deposes this term.
            self._deposed.clear()
            generation = self._bump()
        except KazooException as exc:
            self._unclaim()
            if self._stopped:  # stop() cancelled the lock (CancelledError): leaving, not campaigning again
                return
            LOG.warning("cluster: election interrupted (%s); campaigning again", type(exc).__name__)
            self._wait_for_session()
            if not self.client.connected:  # ZooKeeper away, the session maybe alive: kazoo reconnects meanwhile
                self.client.handler.sleep_func(CAMPAIGN_RETRY_S)
            return
        if generation is None:
            self._unclaim()
            self._release()
            return
        self._deposed.wait()
        self._give_up_lead(f"session {self.state}")
        self._release()
        self._wait_for_session()

    def _drop_own_lock_nodes(self) -> None:
        """Lock nodes this session left in an earlier turn (an election interrupted by a lost connection while the
        session lived on: its node stays) are deleted before a new turn: a new lock would otherwise queue behind
        this node's own old one and wait on itself until the session expired (a lone node that never led)."""
        election = f"{self.base}/election"
        try:
            children = self.client.get_children(election)
        except NoNodeError:
            return
        for child in children:
            try:
                _, stat = self.client.get(f"{election}/{child}")
                client_id = self.client.client_id  # None while disconnected: read once the calls above answered
                if client_id is not None and stat.ephemeralOwner == client_id[0]:
                    self.client.delete(f"{election}/{child}")
                    LOG.info("cluster: removed this session's lock node %s left by an interrupted election", child)
            except NoNodeError:
                continue

    def _take(self, generation: int) -> None:
        """The bump committed: this node leads at ``generation`` (told before any watch reports a newer one)."""
        with self._mutex:
            self._unwatch()  # the dead leader's process: nothing to prove once this node leads
            self._taken = self._claim = generation
            self.leading, self.generation = True, generation
            self.leader_changes += 1
            LOG.info("cluster: %s leads at generation %d", self.node_id, generation)
            self.listener.leading(generation)

    def _give_up_lead(self, why: str) -> None:
        """Leading no more: the listener hears "following" at this node's own generation, before any newer one
        the watch may be holding."""
        with self._mutex:
            if not self.leading:
                return
            self.leading = False
            LOG.warning("cluster: %s no longer leads (%s)", self.node_id, why)
            self.listener.following(self.generation)
            if self._seen is not None and self.generation is not None and newer(self._seen, self.generation):
                self.generation = self._seen  # a newer leader's bump seen while this one led
                self.listener.following(self._seen)

    def _unclaim(self) -> None:
        """A bump that did not commit: the generation tried is not this node's; if the watch held back a
        generation because of it, that report is made now."""
        with self._mutex:
            claim, self._claim = self._claim, self._taken
            seen = self._seen
            if (not self.leading and seen is not None and claim is not None and not newer(seen, claim)
                    and not self._own(seen)):
                self.generation = seen
                self.listener.following(seen)

    def _own(self, generation: int) -> bool:
        """``generation`` is one this node is taking or has taken (or older): never reported as following."""
        return self._claim is not None and not newer(generation, self._claim)

    def _bump(self) -> int | None:
        """The generation + 1 and the leader node, written only if this node's lock node still exists."""
        lock_node = f"{self._lock.path}/{self._lock.node}"
        path = f"{self.base}/generation"
        self.client.ensure_path(path)
        while not self._stopped:
            data, stat = self.client.get(path)
            generation = (int(data or b"0") + 1) % _U64
            lead = {"id": self.node_id, "rest": self.advertise, "generation": generation}
            if self.liveness is not None:
                lead["liveness"] = self.liveness_address
                lead["token"] = self.liveness.token
            body = json.dumps(lead).encode()
            tx = self.client.transaction()
            tx.check(lock_node, 0)
            tx.set_data(path, str(generation).encode(), version=stat.version)
            tx.create(f"{self.base}/leader", body, ephemeral=True)
            with self._mutex:
                self._claim = generation  # from here the watch may deliver it before commit returns
            results = tx.commit()
            failed = [r for r in results if isinstance(r, Exception)]
            if not failed:
                self._take(generation)
                return generation
            if any(isinstance(r, NodeExistsError) for r in failed):
                self._clear_stale_leader()
            elif not any(isinstance(r, BadVersionError) for r in failed):
                LOG.warning("cluster: generation not bumped (%s)", ", ".join(type(r).__name__ for r in failed))
                return None
        return None

    def _clear_stale_leader(self) -> None:
        """A leader node left by this node's own previous term (the lock proves no one else leads)."""
        try:
            self.client.delete(f"{self.base}/leader")
        except NoNodeError:
            pass

    def _release(self) -> None:
        if self._lock is None:
            return
        try:
            if self.state == "connected":
                self._clear_stale_leader()
            self._lock.release()
        except KazooException:
            pass

    def _wait_for_session(self) -> None:
        """After a lost session, campaign again only once a new one exists."""
        if not self._stopped:
            self._reconnected.wait()

    def resign(self, generation: int | None = None) -> None:
        """Step down (a switch fenced this node: a newer generation exists) and campaign again. With
        ``generation``, only the term at that generation: a fence that arrives late does not end a newer term."""
        if generation is not None and (not self.leading or generation != self.generation):
            return
        self._deposed.set()

    def skip_ahead(self, generation: int) -> int | None:
        """A switch refused this leader's ``generation`` as STALE while ZooKeeper holds no newer one: the switches
        remember a generation from before ZooKeeper's data was lost (a fresh server, a compose ``down``), and
        elections one by one would catch up with it one fence at a time. The generation doubles instead (in one
        transaction that checks this node still holds the lock and nobody bumped it meanwhile), so the next
        elections pass any remembered generation in log2 steps. Returns the new generation, None when it was
        not this node's to change."""
        if not self.leading or self._lock is None or self._lock.node is None:
            return None
        path = f"{self.base}/generation"
        try:
            data, stat = self.client.get(path)
            if int(data or b"0") != generation:
                return None  # a newer leader bumped it: its generation is what fenced this one
            skipped = (generation + max(1, min(generation, 1 << 62))) % _U64  # doubled; always "newer" (< 2**63 on)
            tx = self.client.transaction()
            tx.check(f"{self._lock.path}/{self._lock.node}", 0)
            tx.set_data(path, str(skipped).encode(), version=stat.version)
            if any(isinstance(r, Exception) for r in tx.commit()):
                return None
        except (KazooException, ValueError):
            return None
        LOG.warning("cluster: the switches remember a generation newer than ZooKeeper's %d (its data lost?): "
                    "generation set to %d, the next election goes past it", generation, skipped)
        return skipped

    # -- watches ---------------------------------------------------------------------------------------------
    def _members_changed(self, children: list[str]) -> bool:
        members = {}
        for child in children:
            try:
                data, _ = self.client.get(f"{self.base}/members/{child}")
                members[child] = json.loads(data)
            except (NoNodeError, ValueError):
                continue
        self.members = members
        return not self._stopped

    def _generation_changed(self, data: bytes | None, stat: Any) -> bool:
        """A new generation: another node's election, reported as following. Never for a generation this node is
        taking or has taken (its own bump arrives here too, maybe before the election returned), never while it
        leads (its step-down reports it, in order)."""
        if data:
            try:
                generation = int(data)
            except ValueError:
                LOG.error("cluster: %s/generation is not a number (%r); ignored", self.base, data[:40])
                return not self._stopped
            with self._mutex:
                self._seen = generation
                if not self.leading and not self._own(generation):
                    self.generation = generation
                    self.listener.following(generation)
        return not self._stopped

    def _leader_changed(self, data: bytes | None, stat: Any) -> bool:
        try:
            self.leader = json.loads(data) if data else None
        except ValueError:
            LOG.error("cluster: %s/leader is not JSON; ignored", self.base)
            self.leader = None
        if not self._stopped:
            with self._mutex:  # (in order with _take: a leader watches nobody)
                self._watch_leader(self.leader, stat)
        return not self._stopped

    # -- a dead leader, proven ------------------------------------------------------------------------------
    def _watch_leader(self, leader: dict[str, Any] | None, stat: Any) -> None:
        """Watch the process of ``leader`` (another node's, with a liveness address) and nothing else; nobody's
        while this node leads."""
        if (self.liveness is None or self.leading or not isinstance(leader, dict) or leader.get("id") == self.node_id
                or not isinstance(leader.get("liveness"), str) or stat is None):
            self._unwatch()
            return
        address, token, owner, generation = (leader["liveness"], str(leader.get("token")), stat.ephemeralOwner,
                                             leader.get("generation"))
        key = (address, token, owner, generation)
        if self._watch is not None and self._watch[0] == key:
            return
        self._unwatch()
        host, _, port = address.rpartition(":")
        try:
            port_no = int(port)
        except ValueError:
            LOG.error("cluster: leader %s's liveness address %r is not host:port; its death waits for its session",
                      leader["id"], address)
            return
        who = str(leader["id"])
        watch = LivenessWatch(host.strip("[]"), port_no, token,
                              lambda why: self._leader_dead(who, generation, owner, why),
                              self.client.handler.sleep_func)
        self._watch = (key, watch)
        self.client.handler.spawn(watch.run)

    def _unwatch(self) -> None:
        if self._watch is not None:
            self._watch[1].stop()
            self._watch = None

    def _leader_dead(self, who: str, generation: Any, owner: int, why: str) -> None:
        """Proof that leader ``who``'s process ended: its session's lock and leader nodes go now (only nodes
        that session owns), and the next in line is elected without waiting for the session to expire."""
        if self._stopped:
            return
        LOG.warning("cluster: leader %s (generation %s) is gone (%s): its lock released now, not when its %.1f-s "
                    "session expires", who, generation, why, self.session_timeout_s)
        self.dead_leaders_released += 1
        try:
            self._delete_owned(f"{self.base}/leader", owner)
            election = f"{self.base}/election"
            for child in self.client.get_children(election):
                self._delete_owned(f"{election}/{child}", owner)
        except KazooException as exc:
            LOG.warning("cluster: could not release dead leader %s's lock (%s); its session's expiry will",
                        who, type(exc).__name__)

    def _delete_owned(self, path: str, owner: int) -> None:
        """Delete ``path`` if the session ``owner`` holds it (checked by version: never another's node)."""
        try:
            _, stat = self.client.get(path)
            if stat.ephemeralOwner == owner:
                self.client.delete(path, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    def _shared_watch(self, key: str) -> Callable[[bytes | None, Any], bool]:
        def changed(data: bytes | None, stat: Any) -> bool:
            try:
                value = json.loads(data) if data else None
            except ValueError:
                LOG.error("cluster: %s/shared/%s is not JSON; ignored", self.base, key)
                return not self._stopped
            self.listener.shared(key, value)
            return not self._stopped
        return changed

    # -- shared state ----------------------------------------------------------------------------------------
    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON) as shared ``key``: every node's watch hands it to its listener."""
        if key not in SHARED:
            raise ValueError(f"unknown shared key {key!r} (known: {', '.join(SHARED)})")
        path, body = f"{self.base}/shared/{key}", json.dumps(value).encode()
        try:
            self.client.set(path, body)
        except NoNodeError:
            try:
                self.client.create(path, body)
            except NodeExistsError:
                self.client.set(path, body)

    def update(self, key: str, edit: Callable[[Any], Any]) -> Any:
        """Compare-and-set of shared ``key``: ``edit`` (the value as stored, None when unset -> the new value) is
        written only if nobody wrote ``key`` since it was read (the znode's version), else it runs again on the
        newer value, so concurrent edits of different parts of one value (two jobs declared through two nodes)
        all stay. ``edit`` must be pure (it may run more than once) and may raise to write nothing. A value
        ``edit`` leaves equal is not written (no watch fires). Returns the value in force."""
        if key not in SHARED:
            raise ValueError(f"unknown shared key {key!r} (known: {', '.join(SHARED)})")
        path = f"{self.base}/shared/{key}"
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                data, stat = None, None
            current = json.loads(data) if data else None
            value = edit(current)
            if stat is not None and value == current:
                return value
            body = json.dumps(value).encode()
            try:
                if stat is None:
                    self.client.create(path, body)
                else:
                    self.client.set(path, body, version=stat.version)
                return value
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # written (or created, or deleted) by another node meanwhile: edit its value

    def publish_view(self, view: dict[str, Any]) -> bool:
        """The leader's warm view for the followers, written only while this node leads: in one transaction that
        checks its lock node still exists, so a deposed leader (paused past its session) cannot overwrite its
        successor's."""
        if not self.leading or self._lock is None or self._lock.node is None:
            return False
        path, body = f"{self.base}/shared/view", json.dumps(dict(view, generation=self.generation,
                                                                 leader=self.node_id)).encode()
        try:
            if self.client.exists(path) is None:
                try:
                    self.client.create(path, b"null")
                except NodeExistsError:
                    pass
            tx = self.client.transaction()
            tx.check(f"{self._lock.path}/{self._lock.node}", 0)
            tx.set_data(path, body)
            return not any(isinstance(r, Exception) for r in tx.commit())
        except KazooException as exc:  # the connection lost meanwhile (a paused process, ZooKeeper away)
            LOG.warning("cluster: the view not published (%s): the next period tries again", type(exc).__name__)
            return False

    def confirm(self) -> bool:
        """Does ZooKeeper still say this node leads (its lock node exists, asked in a round trip now)? For a
        leader whose process was held up (paused) and may have lost its session meanwhile."""
        if not self.leading or self._lock is None or self._lock.node is None:
            return False
        try:
            self.client.sync(self.base)
            return self.client.exists(f"{self._lock.path}/{self._lock.node}") is not None
        except KazooException:
            return False

    def status(self) -> dict[str, Any]:
        """What GET /mlroute/cluster shows of the coordination."""
        return {"node_id": self.node_id, "rest": self.advertise, "session": self.state, "leading": self.leading,
                "generation": self.generation, "leader": self.leader, "leader_changes": self.leader_changes,
                "members": sorted(self.members.values(), key=lambda m: str(m.get("id"))),
                "liveness": self.liveness_address, "dead_leaders_released": self.dead_leaders_released}
