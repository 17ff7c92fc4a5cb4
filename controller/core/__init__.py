"""The decision core, free of any OpenFlow framework: events in, answers out. ``events`` is its API
(``ControllerCore``: switches, links, hosts, flows, decisions, syncs); ``state`` what it holds and the queries over
it; ``switches`` each switch's tables as the core believes them (read-back, audit, refusals, barriers, the table
budget); ``sflow`` the sFlow wiring; ``views`` what REST and the web view show."""

from controller.core.events import ControllerCore, time_budget_s

__all__ = ["ControllerCore", "time_budget_s"]
