"""mlroute: global routing of ML training traffic on Clos fabrics, as a library and the ``mlroute`` command.

The routing core (``mlroute.routing``: fabric model, the paper's metric, the optimisers), training workloads
(``mlroute.workloads``), the flow-level simulator (``mlroute.sim``), Mininet experiments
(``mlroute.experiment``) and the CLI (``mlroute.cli``). The OpenFlow controller that uses the routing core is the
sibling package ``controller`` (run ``ryu-manager controller/app.py``).
"""

from mlroute.errors import MlrouteError

__version__ = "0.1.0"

__all__ = ["MlrouteError", "__version__"]
