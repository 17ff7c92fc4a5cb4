"""The error classes every part of mlroute shares: one base, so callers can catch them all at once, and the
command line's usage error (here rather than in :mod:`mlroute.cli`, so the commands need not import the CLI
that imports them)."""


class MlrouteError(Exception):
    """Bad input to mlroute (configuration, traffic file, command line, topology): the message says what and
    where."""


class UsageError(MlrouteError):
    """Bad command-line input: the CLI prints it as one line and exits with status 2."""
