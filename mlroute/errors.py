"""The one base class of every error mlroute raises on bad input, so callers can catch them all at once."""


class MlrouteError(Exception):
    """Bad input to mlroute (configuration, traffic file, command line, topology): the message says what and
    where."""
