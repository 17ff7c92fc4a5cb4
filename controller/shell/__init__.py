"""The framework-facing shell around the core (with ``controller/app.py``, the entry file ryu-manager loads):
``replies`` turns the switches' replies into core calls, ``loops`` runs the app's loops and sends what the core
decides, ``cluster`` is the cluster's part (roles, leadership, shared state), ``launcher`` is ``mlroute
controller``."""
