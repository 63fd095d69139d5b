"""Web chat: the ``kind: web`` channel, a chat page served by the ops server. ``kind.py`` is what
the registry reads; ``adapter.py`` is the :class:`~channels.base.Channel` (architecture §3)."""
