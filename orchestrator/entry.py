"""The ``relaybot`` command's entry point (``[project.scripts]`` in pyproject.toml): for ``run``,
SIGHUP is held (:func:`orchestrator.ops.process.hold_hangups`) before the rest of the program is
imported, which takes most of a second; a SIGHUP then (a terminal closed at once, a ``systemctl
reload`` right after the start) would otherwise end the process, its default action. Then
:func:`orchestrator.cli.main`."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    """``relaybot``: :func:`orchestrator.cli.main` on ``sys.argv[1:]``; returns its exit code."""
    if "run" in sys.argv[1:]:
        from orchestrator.ops.process import hold_hangups

        hold_hangups()
    from orchestrator.cli import main as cli_main

    return cli_main()
