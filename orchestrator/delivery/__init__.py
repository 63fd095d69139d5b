"""Delivery: how one reply reaches one chat (architecture §3, §4).

- :mod:`~orchestrator.delivery.events`: the events fed to the engine and the actions it returns.
- :mod:`~orchestrator.delivery.engine`: :class:`DeliveryEngine`, the sans-I/O state machine
  (time, the write in flight, the event table) and :class:`DeliveryStats`;
  :mod:`~orchestrator.delivery.reply_state`: the one immutable state of a reply and the engine's
  transition table.
- :mod:`~orchestrator.delivery.drafts` (``partial``) and :mod:`~orchestrator.delivery.pieces`
  (``off``, ``multi_message``): the planners that decide what each message shows, both as pure
  functions in one table each over an immutable record in the reply's state. The first over
  :mod:`~orchestrator.delivery.draft_state` (its record),
  :mod:`~orchestrator.delivery.draft_layout` (where a draft's messages are cut, kept
  incrementally) and :mod:`~orchestrator.delivery.draft_scan` (the next write);
  :mod:`~orchestrator.delivery.slots`: the state of each message of a draft (one enum, one
  transition table). The second over :mod:`~orchestrator.delivery.queue_state` (its record: the
  messages to send) and :mod:`~orchestrator.delivery.status_messages` (the tool status messages'
  edits). :mod:`~orchestrator.delivery.planning`: what both share (the incremental transcript,
  the table of failure effects, the notices, the counters).
- :mod:`~orchestrator.delivery.splitting`: where to cut a text that outgrows a message.
- :mod:`~orchestrator.delivery.settings`: :class:`DeliverySettings`, built from a channel.
- :mod:`~orchestrator.delivery.driver`: :class:`DeliveryDriver`, which runs an engine against a
  channel on an event loop, and :mod:`~orchestrator.delivery.hooks`: the hook's verdict from a
  worker process and the :class:`PiecePolicy` seam to the outbound policy (the two modules here
  that do I/O; nothing here imports the policy).

Nothing is imported here, so importing a core module does not pull in the driver's I/O.
"""
