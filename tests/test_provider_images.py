"""Image parts on the wire, in each provider's own format (architecture §2/§3 "attachments"): a user
message with a caption and two images, sent through the real provider to the local server,
and the request body the server read asserted. With ``vision: false`` no image part is sent.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from config.models import ProviderConfig
from providers.base import ChatMessage, ChatRequest, ImagePart
from providers.registry import build_provider
from tests.peers.provider_server import ProviderServer, Reply

JPEG = b"\xff\xd8\xff\xe0 a tiny jpeg \x00\x01"
PNG = b"\x89PNG\r\n\x1a\n a tiny png \xff"
B64_JPEG = base64.b64encode(JPEG).decode()
B64_PNG = base64.b64encode(PNG).decode()

REQUEST = ChatRequest(
    messages=(
        ChatMessage("system", "Be brief."),
        ChatMessage(
            "user",
            "What is in these?",
            images=(ImagePart("image/jpeg", JPEG), ImagePart("image/png", PNG)),
        ),
    )
)

ANSWERS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai_chat": (
        "/v1/chat/completions",
        {
            "id": "c1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
        },
    ),
    "openai_responses": (
        "/v1/responses",
        {
            "id": "r1",
            "object": "response",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": "m1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                }
            ],
        },
    ),
    "anthropic": (
        "/v1/messages",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    ),
    "ollama": (
        "/api/chat",
        {
            "model": "m",
            "message": {"role": "assistant", "content": "ok"},
            "done": True,
            "done_reason": "stop",
        },
    ),
}

EXPECTED_USER: dict[str, dict[str, Any]] = {
    "openai_chat": {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{B64_JPEG}"}},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64_PNG}"}},
        ],
    },
    "openai_responses": {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in these?"},
            {"type": "input_image", "image_url": f"data:image/jpeg;base64,{B64_JPEG}"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{B64_PNG}"},
        ],
    },
    "anthropic": {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/jpeg", "data": B64_JPEG},
            },
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG},
            },
            {"type": "text", "text": "What is in these?"},
        ],
    },
    "ollama": {"role": "user", "content": "What is in these?", "images": [B64_JPEG, B64_PNG]},
}

TEXT_ONLY: dict[str, dict[str, Any]] = {
    "openai_chat": {"role": "user", "content": "What is in these?"},
    "openai_responses": {"role": "user", "content": "What is in these?"},
    "anthropic": {"role": "user", "content": [{"type": "text", "text": "What is in these?"}]},
    "ollama": {"role": "user", "content": "What is in these?"},
}


def _config(kind: str, server: ProviderServer, vision: bool) -> ProviderConfig:
    base = server.url if kind in ("anthropic", "ollama") else f"{server.url}/v1"
    return ProviderConfig(kind=kind, base_url=base, api_key="k", model="m", vision=vision)  # type: ignore[arg-type]


def _user_entry(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    entries = body["input"] if kind == "openai_responses" else body["messages"]
    (user,) = [e for e in entries if e.get("role") == "user"]
    return user  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", sorted(ANSWERS))
@pytest.mark.parametrize("vision", [True, False])
async def test_images_on_the_wire(kind: str, vision: bool) -> None:
    path, answer = ANSWERS[kind]
    async with ProviderServer() as server:
        server.script(path, [Reply.json(answer)])
        provider = build_provider("p", _config(kind, server, vision))
        try:
            response = await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    assert response.text == "ok"
    (recorded,) = server.requests
    expected = EXPECTED_USER[kind] if vision else TEXT_ONLY[kind]
    assert _user_entry(kind, recorded.json) == expected


@pytest.mark.parametrize("kind", sorted(ANSWERS))
async def test_an_image_without_a_caption_is_sent_alone(kind: str) -> None:
    path, answer = ANSWERS[kind]
    request = ChatRequest(
        messages=(ChatMessage("user", "", images=(ImagePart("image/png", PNG),)),)
    )
    async with ProviderServer() as server:
        server.script(path, [Reply.json(answer)])
        provider = build_provider("p", _config(kind, server, True))
        try:
            await provider.complete(request)
        finally:
            await provider.aclose()
    user = _user_entry(kind, server.requests[0].json)
    if kind == "ollama":
        assert user == {"role": "user", "content": "", "images": [B64_PNG]}
    else:
        assert len(user["content"]) == 1  # the image, no empty text part
        assert "text" not in {part["type"] for part in user["content"]}
