"""The JSON-parse seam of the providers: msgspec when installed (``relaybot[fast]``), else json.

:func:`loads` parses exactly what ``json.loads`` parses and returns the same values. msgspec
reads every JSON integer as a Python ``int`` whatever its size (as ``json`` does; orjson would
read one beyond 64 bits as a float, so its results needed a walk for floats on every event) and
floats correctly rounded, as ``json`` does. It refuses a few inputs the standard library accepts
(lone UTF-16 surrogate escapes such as ``"\\ud83d"``, which a model's stream can hold when a
token split an emoji; ``NaN`` and ``Infinity``; ``1e400``, which ``json`` reads as ``inf``; a
text holding a lone surrogate code point), so on any msgspec error the text is parsed again
with ``json.loads``, whose error (``ValueError``) is the one raised. The decoded value is never
inspected afterwards: an ordinary event costs one C call. bench/README.md has the figures
(about 10,000 instructions per Chat Completions chunk against 22,500 for orjson with the walk
and 30,000 for ``json.loads``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["FAST", "loads"]

_decode: Callable[[str | bytes], Any] | None
try:
    import msgspec
except ImportError:  # pragma: no cover - depends on the install
    _decode = None
    _REFUSED: tuple[type[Exception], ...] = ()
else:
    _decode = msgspec.json.Decoder().decode
    _REFUSED = (msgspec.DecodeError, UnicodeError)

FAST = _decode is not None
"""Whether msgspec is used."""


def loads(data: str | bytes) -> Any:
    """Parse one JSON text (RFC 8259) as ``json.loads`` does.

    Raises:
        ValueError: the text is not JSON (``json.JSONDecodeError``).
    """
    if _decode is not None:
        try:
            return _decode(data)
        except _REFUSED:
            pass
    return json.loads(data)
