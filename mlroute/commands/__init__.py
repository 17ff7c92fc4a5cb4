"""Sub-commands of the `mlroute` CLI, one module each.

Each module defines ``NAME`` (the sub-command), ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. The CLI discovers them, so adding a command never edits a shared file.
"""
