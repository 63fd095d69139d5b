"""The process that runs the ``on_message_sending`` hook (architecture §4 "The hook"): child side.

Theory of operation
-------------------
``python -m orchestrator.policy.hook_worker`` is started by :mod:`orchestrator.policy.hook_pool`
with pipes on stdin and stdout. Every message either way is one *frame*
(:mod:`orchestrator.policy.hook_frames`): a 4-byte big-endian length, then that many bytes of
UTF-8 JSON.

1. The parent sends ``{"path": "package.module:function", "sys_path": [...]}``; the worker takes
   the parent's ``sys.path`` (so the hook imports as it would in the parent), imports the hook
   with :func:`~orchestrator.policy.hook.load_hook` and answers ``{"ready": true}``, or
   ``{"error": message}`` (the :class:`~orchestrator.policy.errors.PolicyError` message) and
   exits 1.
2. Then, one piece at a time: ``{"channel", "chat_id", "text"}`` in; ``{"text": str | None}``
   (the hook's output, cut by :func:`~orchestrator.policy.hook.call_hook`) or ``{"error":
   "Type: message"}`` (what it raised, with its traceback under ``"trace"``) out.
3. End of stdin: the worker exits 0.

The parent owns the worker's lifetime: it kills it (SIGKILL) at the hook's timeout and at
shutdown. So the worker ignores SIGINT and SIGTERM (a Ctrl-C or a SIGTERM sent to the whole
process group must not kill a hook in the middle of the drain), and on Linux asks the kernel to
kill it when its parent dies, so that no worker outlives a bot that was itself killed.
"""

from __future__ import annotations

import json
import signal
import sys
import traceback
from typing import Any, BinaryIO

from orchestrator.policy.hook_frames import FRAME_HEADER, decode_frame_length, encode_frame

__all__ = ["main"]


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _read(stream: BinaryIO) -> dict[str, Any] | None:
    """The next frame's message, or ``None`` at the end of the stream."""
    header = _read_exactly(stream, FRAME_HEADER.size)
    if header is None:
        return None
    body = _read_exactly(stream, decode_frame_length(header))
    if body is None:
        return None
    message = json.loads(body)
    if not isinstance(message, dict):
        raise ValueError("a frame is a JSON object")
    return message


def _write(stream: BinaryIO, message: dict[str, Any]) -> None:
    stream.write(encode_frame(message))
    stream.flush()


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no libc symbol: the parent's EOF still ends us
        pass


def main() -> int:
    """Serve one parent over stdin/stdout (see the module docstring); returns the exit code."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # The hook's own prints must not corrupt the frames: they go to stderr.
    sys.stdout = sys.stderr
    hello = _read(stdin)
    if hello is None:
        return 0
    sys.path[:] = [str(p) for p in hello.get("sys_path", sys.path)]
    from orchestrator.policy.errors import PolicyError
    from orchestrator.policy.hook import call_hook, load_hook

    try:
        hook = load_hook(str(hello["path"]))
    except PolicyError as exc:
        _write(stdout, {"error": exc.message})
        return 1
    _write(stdout, {"ready": True})
    while (piece := _read(stdin)) is not None:
        try:
            text = call_hook(hook, piece["channel"], piece["chat_id"], piece["text"])
        except Exception as exc:  # the hook's failure is the parent's to log
            reply: dict[str, Any] = {
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc(),
            }
        else:
            reply = {"text": text}
        _write(stdout, reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
