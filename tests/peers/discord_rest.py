"""The REST v10 routes of the local Discord peer (https://discord.com/developers/docs/resources).

Each handler takes the aiohttp request and its decoded JSON body and returns ``(status, body)``
(``body`` None: 204 No Content) or raises :class:`~tests.peers.discord_wire.Refused`;
:class:`tests.peers.discord.DiscordServer` wraps them with recording, auth and faults.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import web

from tests.peers.discord_interactions import Interactions
from tests.peers.discord_wire import APPLICATION_ID, BOT_ID, ApiError, Refused
from tests.peers.discord_world import World

__all__ = ["Handler", "RestRoutes"]

NOT_APPLICATION_OWNER = ApiError(
    403, 20012, "You are not authorized to perform this action on this application"
)

Handler = Callable[[web.Request, Any], Awaitable[tuple[int, Any]]]


def _int(request: web.Request, name: str) -> int:
    try:
        return int(request.match_info[name])
    except ValueError:
        error = ApiError.invalid_form(name, "NUMBER_TYPE_COERCE", "Value is not snowflake.")
        raise Refused(error) from None


def _body(body: Any) -> dict[str, Any]:
    return body if isinstance(body, dict) else {}


class RestRoutes:
    """The route table over one :class:`World` and its :class:`Interactions`;
    ``gateway_url`` is set once the server runs."""

    def __init__(self, world: World, interactions: Interactions) -> None:
        self.world = world
        self.interactions = interactions
        self.gateway_url = ""

    def routes(self) -> Iterator[tuple[str, str, Handler]]:
        yield "GET", "/gateway", self.gateway
        yield "GET", "/gateway/bot", self.gateway_bot
        yield "GET", "/users/@me", self.me
        yield "GET", "/oauth2/applications/@me", self.application
        yield "POST", "/users/@me/channels", self.create_dm
        yield "GET", "/channels/{channel_id}", self.get_channel
        yield "GET", "/channels/{channel_id}/messages", self.list_messages
        yield "POST", "/channels/{channel_id}/messages", self.send_message
        yield "GET", "/channels/{channel_id}/messages/{message_id}", self.get_message
        yield "PATCH", "/channels/{channel_id}/messages/{message_id}", self.edit_message
        yield "DELETE", "/channels/{channel_id}/messages/{message_id}", self.delete_message
        yield "POST", "/channels/{channel_id}/typing", self.typing
        yield "GET", "/applications/{application_id}/commands", self.get_commands
        yield "PUT", "/applications/{application_id}/commands", self.put_commands
        yield "GET", "/applications/{application_id}/guilds/{guild_id}/commands", self.get_commands
        yield "PUT", "/applications/{application_id}/guilds/{guild_id}/commands", self.put_commands
        yield (
            "POST",
            "/interactions/{interaction_id}/{interaction_token}/callback",
            self.interaction_callback,
        )
        yield "POST", "/webhooks/{application_id}/{interaction_token}", self.followup
        yield (
            "PATCH",
            "/webhooks/{application_id}/{interaction_token}/messages/@original",
            self.edit_original,
        )

    def route_keys(self) -> set[str]:
        return {f"{method} {template}" for method, template, _ in self.routes()}

    # -- session -------------------------------------------------------------------------------

    async def gateway(self, request: web.Request, body: Any) -> tuple[int, Any]:
        return 200, {"url": self.gateway_url}

    async def gateway_bot(self, request: web.Request, body: Any) -> tuple[int, Any]:
        limit = {"total": 1000, "remaining": 999, "reset_after": 86_400_000, "max_concurrency": 1}
        return 200, {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}

    async def me(self, request: web.Request, body: Any) -> tuple[int, Any]:
        return 200, self.world.bot_user

    async def application(self, request: web.Request, body: Any) -> tuple[int, Any]:
        owner = self.world.users[self.world.user_id]
        return 200, {
            "id": str(APPLICATION_ID),
            "name": "Relay",
            "icon": None,
            "description": "",
            "bot_public": False,
            "bot_require_code_grant": False,
            "verify_key": "0" * 64,
            "owner": owner,
            "team": None,
            "flags": 0,
            "bot": self.world.bot_user,
            "summary": "",
            "redirect_uris": [],
            "interactions_endpoint_url": None,
        }

    # -- channels and messages -----------------------------------------------------------------

    async def create_dm(self, request: web.Request, body: Any) -> tuple[int, Any]:
        recipient = int(_body(body).get("recipient_id", 0))
        if recipient not in self.world.users or recipient == BOT_ID:
            raise Refused(ApiError(400, 50007, "Cannot send messages to this user"))
        return 200, self.world.channel(self.world.open_dm(recipient))

    async def get_channel(self, request: web.Request, body: Any) -> tuple[int, Any]:
        return 200, self.world.channel(_int(request, "channel_id"))

    async def list_messages(self, request: web.Request, body: Any) -> tuple[int, Any]:
        channel_id = _int(request, "channel_id")
        self.world.channel(channel_id)
        limit = int(request.query.get("limit", "50"))
        newest_first = reversed(self.world.visible(channel_id, bot_only=False))
        return 200, [m.payload for m in newest_first][:limit]

    async def send_message(self, request: web.Request, body: Any) -> tuple[int, Any]:
        return 200, self.world.bot_send(_int(request, "channel_id"), _body(body))

    async def get_message(self, request: web.Request, body: Any) -> tuple[int, Any]:
        msg = self.world.get_message(_int(request, "channel_id"), _int(request, "message_id"))
        return 200, msg.payload

    async def edit_message(self, request: web.Request, body: Any) -> tuple[int, Any]:
        channel_id, message_id = _int(request, "channel_id"), _int(request, "message_id")
        return 200, self.world.bot_edit(channel_id, message_id, _body(body))

    async def delete_message(self, request: web.Request, body: Any) -> tuple[int, Any]:
        self.world.bot_delete(_int(request, "channel_id"), _int(request, "message_id"))
        return 204, None

    async def typing(self, request: web.Request, body: Any) -> tuple[int, Any]:
        self.world.channel(_int(request, "channel_id"))
        return 204, None

    # -- application commands and interactions -------------------------------------------------

    def _command_scope(self, request: web.Request) -> int | None:
        if _int(request, "application_id") != APPLICATION_ID:
            raise Refused(NOT_APPLICATION_OWNER)
        return _int(request, "guild_id") if "guild_id" in request.match_info else None

    async def get_commands(self, request: web.Request, body: Any) -> tuple[int, Any]:
        return 200, self.interactions.commands.get(self._command_scope(request), [])

    async def put_commands(self, request: web.Request, body: Any) -> tuple[int, Any]:
        scope = self._command_scope(request)
        return 200, self.interactions.put_commands(scope, body if isinstance(body, list) else [])

    async def interaction_callback(self, request: web.Request, body: Any) -> tuple[int, Any]:
        result = self.interactions.callback(
            _int(request, "interaction_id"), request.match_info["interaction_token"], _body(body)
        )
        with_response = request.query.get("with_response", "").lower() in ("1", "true")
        return (200, result) if with_response else (204, None)

    async def followup(self, request: web.Request, body: Any) -> tuple[int, Any]:
        return 200, self.interactions.followup(request.match_info["interaction_token"], _body(body))

    async def edit_original(self, request: web.Request, body: Any) -> tuple[int, Any]:
        token = request.match_info["interaction_token"]
        return 200, self.interactions.edit_original(token, _body(body))
