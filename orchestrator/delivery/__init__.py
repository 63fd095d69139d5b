"""Delivery: how one reply reaches one chat (DESIGN §3, §4).

- :mod:`~orchestrator.delivery.events`: the events fed to the engine and the actions it returns.
- :mod:`~orchestrator.delivery.engine`: :class:`DeliveryEngine`, the sans-I/O state machine
  (time, the write in flight, the event table) and :class:`DeliveryStats`.
- :mod:`~orchestrator.delivery.drafts` (``partial``) and :mod:`~orchestrator.delivery.pieces`
  (``off``, ``multi_message``): the planners that decide what each message shows.
- :mod:`~orchestrator.delivery.splitting`: where to cut a text that outgrows a message.
- :mod:`~orchestrator.delivery.settings`: :class:`DeliverySettings`, built from a channel.
- :mod:`~orchestrator.delivery.driver`: :class:`DeliveryDriver`, which runs an engine against a
  channel on an event loop (the only module here that does I/O).

Nothing is imported here, so importing a core module does not pull in the driver's I/O.
"""
