"""mlroute: global, periodically re-optimised routing of ML training traffic on Clos fabrics."""

__version__ = "0.1.0"
