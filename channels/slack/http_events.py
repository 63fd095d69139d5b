"""The Events API over HTTP (``signing_secret``): events, button presses and slash commands
posted by Slack to ``POST /slack/events`` on ``events_listen`` (architecture §3 "Inbound").

Every request is checked against Slack's signature (``X-Slack-Signature``, ``v0=`` HMAC-SHA256
of ``v0:{X-Slack-Request-Timestamp}:{body}`` with the signing secret, at most 5 minutes old:
https://docs.slack.dev/authentication/verifying-requests-from-slack) before it is read; a
request failing it is 401 and read no further. Slack wants an answer within 3 s: the payload is
handed to the adapter's queue and answered at once (200; a slash command's answer is its
ephemeral acknowledgement). A retry (``X-Slack-Retry-Num``, sent when an answer came late) is
answered 200 too, and the message it carries is handed on once (:mod:`channels.slack.inbound`).
``url_verification`` is answered with its ``challenge``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from slack_sdk.signature import SignatureVerifier

__all__ = ["EVENTS_PATH", "EventsServer"]

_LOG = logging.getLogger("channels.slack")

EVENTS_PATH = "/slack/events"

Receive = Callable[[str, dict[str, Any]], dict[str, Any] | None]
"""``(envelope kind, payload)`` → the answer's body (``None``: empty): the adapter's reader."""


class EventsServer:
    """Serves :data:`EVENTS_PATH` on ``host:port``, handing each payload to ``receive``."""

    def __init__(self, signing_secret: str, receive: Receive) -> None:
        self._verifier = SignatureVerifier(signing_secret)
        self._receive = receive
        self._runner: web.AppRunner | None = None
        self.retries = 0
        """Requests Slack sent again (``X-Slack-Retry-Num``)."""

    async def start(self, host: str, port: int) -> None:
        """Listen; raises OSError when the address is taken."""
        app = web.Application()
        app.router.add_post(EVENTS_PATH, self._post)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _post(self, request: web.Request) -> web.Response:
        body = await request.read()
        if not self._verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401, text="invalid signature")
        if request.headers.get("X-Slack-Retry-Num"):
            self.retries += 1
            _LOG.info(
                "Slack sent a request again (%s)", request.headers.get("X-Slack-Retry-Reason")
            )
        if request.content_type == "application/json":
            payload = json.loads(body)
            if payload.get("type") == "url_verification":
                return web.json_response({"challenge": payload.get("challenge")})
            self._receive("events_api", payload)
            return web.Response(status=200)
        form = {k: str(v) for k, v in (await request.post()).items()}
        if "payload" in form:
            self._receive("interactive", json.loads(form["payload"]))
            return web.Response(status=200)
        answer = self._receive("slash_commands", form)
        return web.json_response(answer) if answer else web.Response(status=200)
