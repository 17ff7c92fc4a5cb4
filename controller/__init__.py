"""The OpenFlow 1.3 controller: the Ryu application (``app.py``) and its Ryu-free decision core.

Run it with ``ryu-manager controller/app.py``. Only ``app.py`` (and the modules it names as Ryu shells) import
Ryu; everything else is plain data and functions, unit-tested without a network. The routing core it calls
lives in the sibling package ``mlroute``.
"""

from mlroute import __version__

__all__ = ["__version__"]
