"""Slack: the ``kind: slack`` channel. ``kind.py`` is what the registry reads; ``adapter.py``
is the :class:`~channels.base.Channel` (architecture §3)."""
