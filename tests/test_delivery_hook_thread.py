"""A hook that never returns is abandoned: it neither blocks the loop nor the process's exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]

_SCRIPT = textwrap.dedent(
    """
    import anyio

    from orchestrator.delivery.events import GuardPiece, PieceWithheld
    from orchestrator.delivery.hooks import guard_piece
    from tests.policy_hooks import hang


    class Policy:
        has_hook = True
        hook_timeout_secs = 0.2

        def hook_piece(self, text):
            return hang("c", "1", text)

        def redact_piece(self, text):
            return text

        def redact_line(self, text):
            return text


    async def main():
        verdict = await guard_piece(Policy(), GuardPiece(1, "hello"), where="chat 1")
        assert isinstance(verdict, PieceWithheld), verdict
        print("withheld", flush=True)


    anyio.run(main)
    """
)


def test_a_hung_hook_does_not_keep_the_process_alive() -> None:
    """The piece is withheld at the timeout and the interpreter exits at once after that (a
    pooled, non-daemon worker thread would be joined at exit: an hour here)."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "withheld"
