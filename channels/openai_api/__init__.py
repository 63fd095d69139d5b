"""OpenAI-compatible API: the ``kind: openai_api`` channel. ``kind.py`` is what the registry
reads; ``adapter.py`` is the :class:`~channels.base.Channel` (architecture §3)."""
