"""The local Bot API peer itself: exact error bodies, markup checks, long polling, hooks.

Raw HTTP with httpx, so these tests pin the wire format the adapter tests rely on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from tests.peers.telegram import TelegramBotApiServer
from tests.peers.telegram_markup import MarkupError, parse_html
from tests.peers.telegram_wire import (
    CANT_BE_EDITED,
    DELETE_NOT_FOUND,
    EDIT_NOT_FOUND,
    NOT_MODIFIED,
    TOO_LONG,
    ApiError,
)


@pytest.fixture
async def server() -> AsyncIterator[TelegramBotApiServer]:
    async with TelegramBotApiServer() as peer:
        peer.open_chat(111)
        yield peer


@pytest.fixture
async def client(server: TelegramBotApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"{server.base_url}{server.token}/") as http:
        yield http


async def _call(client: httpx.AsyncClient, method: str, **params: Any) -> tuple[int, Any]:
    response = await client.post(method, json=params)
    assert response.headers["content-type"].startswith("application/json")
    return response.status_code, response.json()


def test_error_bodies_are_telegrams(fixtures_dir: Path) -> None:
    recorded = json.loads((fixtures_dir / "telegram_bot_api_responses.json").read_text())
    assert NOT_MODIFIED.body() == recorded["error_not_modified"]
    assert TOO_LONG.body() == recorded["error_too_long"]
    assert EDIT_NOT_FOUND.body() == recorded["error_edit_not_found"]
    assert DELETE_NOT_FOUND.body() == recorded["error_delete_not_found"]
    assert CANT_BE_EDITED.body() == recorded["error_cannot_be_edited"]
    assert ApiError.flood(9).body() == recorded["error_flood"]
    assert (
        ApiError.cant_parse('Can\'t find end tag corresponding to start tag "b"').body()
        == (recorded["error_cant_parse_entities"])
    )
    with pytest.raises(MarkupError) as caught:
        parse_html("<b>bold")
    assert ApiError.cant_parse(str(caught.value)).body() == recorded["error_cant_parse_entities"]


async def test_wrong_token_and_unknown_method(server: TelegramBotApiServer) -> None:
    async with httpx.AsyncClient() as http:
        bad = await http.post(f"{server.base_url}1:wrong/getMe")
        assert (bad.status_code, bad.json()) == (
            401,
            {"ok": False, "error_code": 401, "description": "Unauthorized"},
        )
        unknown = await http.post(f"{server.base_url}{server.token}/sendSticker")
        assert unknown.status_code == 404


async def test_send_edit_delete_and_states(
    server: TelegramBotApiServer, client: httpx.AsyncClient
) -> None:
    status, body = await _call(client, "sendMessage", chat_id=111, text="Hello")
    assert status == 200 and body["result"]["text"] == "Hello"
    message_id = body["result"]["message_id"]
    status, body = await _call(
        client, "editMessageText", chat_id=111, message_id=message_id, text="Hello"
    )
    assert (status, body) == (400, NOT_MODIFIED.body())
    status, _ = await _call(
        client,
        "editMessageText",
        chat_id=111,
        message_id=message_id,
        text="<b>Hi</b>",
        parse_mode="HTML",
    )
    assert status == 200
    assert server.messages(111)[0].entities == ({"type": "bold", "offset": 0, "length": 2},)
    status, body = await _call(
        client,
        "editMessageText",
        chat_id=111,
        message_id=message_id,
        text="<b>Hi",
        parse_mode="HTML",
    )
    assert status == 400 and body["description"].startswith("Bad Request: can't parse entities")
    assert (await _call(client, "deleteMessage", chat_id=111, message_id=message_id))[0] == 200
    status, body = await _call(client, "deleteMessage", chat_id=111, message_id=message_id)
    assert (status, body) == (400, DELETE_NOT_FOUND.body())
    status, body = await _call(
        client, "editMessageText", chat_id=111, message_id=message_id, text="x"
    )
    assert (status, body) == (400, EDIT_NOT_FOUND.body())
    assert server.states(111) == [("Hello",), ("Hi",), ()]


async def test_too_long_counts_utf16_of_visible_text(client: httpx.AsyncClient) -> None:
    ok = await _call(client, "sendMessage", chat_id=111, text="😀" * 2048)
    assert ok[0] == 200
    assert await _call(client, "sendMessage", chat_id=111, text="a" + "😀" * 2048) == (
        400,
        TOO_LONG.body(),
    )
    # markup does not count: 4096 visible units inside tags are accepted
    html = "<b>" + "a" * 4096 + "</b>"
    assert (await _call(client, "sendMessage", chat_id=111, text=html, parse_mode="HTML"))[0] == 200
    bad_entity = [{"type": "bold", "offset": 0, "length": 5}]
    status, body = await _call(client, "sendMessage", chat_id=111, text="abc", entities=bad_entity)
    assert status == 400 and "can't parse entities" in body["description"]


async def test_user_messages_cannot_be_edited(
    server: TelegramBotApiServer, client: httpx.AsyncClient
) -> None:
    user_message = server.inject_message(111, "mine")
    status, body = await _call(
        client, "editMessageText", chat_id=111, message_id=user_message["message_id"], text="x"
    )
    assert (status, body) == (400, CANT_BE_EDITED.body())


async def test_long_poll_wakes_on_update_and_confirms_by_offset(
    server: TelegramBotApiServer, client: httpx.AsyncClient
) -> None:
    poll = asyncio.create_task(_call(client, "getUpdates", timeout=5))
    await server.wait_for(lambda: bool(server.calls_to("getUpdates")))
    server.inject_message(111, "/start@relay_test_bot hi @relay_test_bot", chat_type="private")
    status, body = await poll
    assert status == 200 and len(body["result"]) == 1
    update = body["result"][0]
    assert [e["type"] for e in update["message"]["entities"]] == ["bot_command", "mention"]
    again = await _call(client, "getUpdates", timeout=0)
    assert len(again[1]["result"]) == 1  # not confirmed yet
    confirmed = await _call(client, "getUpdates", offset=update["update_id"] + 1, timeout=0)
    assert confirmed[1]["result"] == []


async def test_long_poll_ends_when_the_server_stops() -> None:
    peer = TelegramBotApiServer()
    await peer.start()
    async with httpx.AsyncClient(base_url=f"{peer.base_url}{peer.token}/") as http:
        poll = asyncio.create_task(http.post("getUpdates", json={"timeout": 30}))
        await peer.wait_for(lambda: bool(peer.calls_to("getUpdates")))
        await peer.stop()
        response = await asyncio.wait_for(poll, 5)
    assert response.json() == {"ok": True, "result": []}


async def test_scheduled_failure_and_delay(
    server: TelegramBotApiServer, client: httpx.AsyncClient
) -> None:
    server.fail("sendMessage", call=2, error=ApiError.flood(9))
    server.delay("sendMessage", call=3, seconds=0.3)
    assert (await _call(client, "sendMessage", chat_id=111, text="1"))[0] == 200
    assert await _call(client, "sendMessage", chat_id=111, text="2") == (
        429,
        ApiError.flood(9).body(),
    )
    started = time.monotonic()
    assert (await _call(client, "sendMessage", chat_id=111, text="3"))[0] == 200
    third = server.calls_to("sendMessage")[2]
    assert third.answered_at is not None and third.answered_at - third.at >= 0.3
    assert time.monotonic() - started >= 0.3
    assert server.texts(111) == ["1", "3"]  # the 429 was not applied


async def test_failure_of_the_first_matching_call(
    server: TelegramBotApiServer, client: httpx.AsyncClient
) -> None:
    bold = [{"type": "bold", "offset": 0, "length": 1}]
    server.fail_first("sendMessage", where=lambda p: "entities" in p, error=TOO_LONG)
    assert (await _call(client, "sendMessage", chat_id=111, text="a"))[0] == 200
    refused = await _call(client, "sendMessage", chat_id=111, text="b", entities=bold)
    assert refused == (400, TOO_LONG.body())
    assert (await _call(client, "sendMessage", chat_id=111, text="c", entities=bold))[0] == 200
    assert server.texts(111) == ["a", "c"]


async def test_callback_queries_are_answered_once(
    server: TelegramBotApiServer, client: httpx.AsyncClient
) -> None:
    markup = {"inline_keyboard": [[{"text": "ok", "callback_data": "d"}]]}
    _, body = await _call(client, "sendMessage", chat_id=111, text="?", reply_markup=markup)
    query_id = server.inject_callback_query(111, body["result"]["message_id"], "d")
    assert (await _call(client, "answerCallbackQuery", callback_query_id=query_id))[0] == 200
    assert (await _call(client, "answerCallbackQuery", callback_query_id=query_id))[0] == 400


async def test_webhook_delivery_with_secret(
    server: TelegramBotApiServer, client: httpx.AsyncClient
) -> None:
    received: list[tuple[str | None, dict[str, Any]]] = []

    async def hook(request: web.Request) -> web.Response:
        secret = request.headers.get("X-Telegram-Bot-Api-Secret-Token")
        received.append((secret, await request.json()))
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        url = f"http://127.0.0.1:{port}/hook"
        await _call(client, "setWebhook", url=url, secret_token="s3cret")
        assert (await _call(client, "getUpdates"))[0] == 409
        server.inject_message(111, "via webhook")
        await server.wait_for(lambda: bool(received))
        assert received[0][0] == "s3cret"
        assert received[0][1]["message"]["text"] == "via webhook"
    finally:
        await runner.cleanup()
