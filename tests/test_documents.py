"""Documents through the Telegram wire server (issue 32; architecture §3 "Inputs"): the real daemon,
the Bot API peer (documents, getFile, downloads) and a local Chat Completions server. A PDF
reaches the model as a ``file`` part, a ``.py`` file as text marked as untrusted; an over-size
file, a PDF over the page cap and an unsupported type get their one line and no model call.
History keeps a note of each document (name, type, pages, hash), never its bytes.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import anyio

from channels.base import Attachment, InboundMessage
from orchestrator.store import Store
from orchestrator.turn.documents import ACCEPTED, screen_documents
from tests.pdf_files import pdf_with_pages
from tests.peers.provider_server import ProviderServer
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_chats import PATH, config_text, daemon_running, observed
from tests.telegram_harness import CHAT, reply, text_stream

PDF = pdf_with_pages("Quarterly report", "Revenue grew")
SOURCE = b"print('hi')\n"


def _doc(data: bytes, mime: str, name: str, size: int | None = None) -> InboundMessage:
    attachment = Attachment(mime, data, size or len(data), "document", name)
    return InboundMessage("tg", "1", "2", "@a", "", attachments=(attachment,))


def _screen(message: InboundMessage, max_bytes: int = 1000, max_pages: int = 5) -> Any:
    return screen_documents(message, max_bytes=max_bytes, max_pages=max_pages)


def test_screening_takes_pdfs_and_text_and_refuses_the_rest() -> None:
    (pdf,), notice = _screen(_doc(PDF, "application/pdf", "r.pdf"), max_bytes=10_000)
    assert notice is None and pdf.pages == 2 and pdf.text == "Quarterly report\n\nRevenue grew"
    # Source code announced as octet-stream is recognised by its extension.
    (py,), _ = _screen(_doc(SOURCE, "application/octet-stream", "x.py"))
    assert (py.mime_type, py.text) == ("text/plain", "print('hi')\n")
    for message, line in [
        (
            _doc(b"PK\x03\x04", "application/zip", "a.zip"),
            f"This file type (application/zip) is not supported; send a {ACCEPTED}.",
        ),
        (
            _doc(SOURCE, "text/plain", "big.txt", size=2 * 1024 * 1024),
            "This file is too large (2.0 MB; the limit is 0.0 MB).",
        ),
        (
            _doc(b"a\x00b", "text/plain", "n.txt"),
            f"This file (n.txt) is not text; send a {ACCEPTED}.",
        ),
        (
            _doc(b"%PDF-1.4 broken", "application/pdf", "b.pdf"),
            "This PDF (b.pdf) could not be read; please check the file and send it again.",
        ),
    ]:
        assert _screen(message) == ((), line)
    many = pdf_with_pages(*["p"] * 6)
    assert _screen(_doc(many, "application/pdf", "m.pdf"), max_bytes=10_000) == (
        (),
        "This PDF (m.pdf) has 6 pages; the limit is 5.",
    )


def _user_content(request_json: dict[str, Any]) -> Any:
    return [m for m in request_json["messages"] if m["role"] == "user"][-1]["content"]


async def test_a_pdf_and_a_py_file_reach_the_model_and_are_replayed_as_text(
    tmp_path: Path,
) -> None:
    answers = ["A report.", "Adds.", "It grew."]
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [reply(text_stream([a])) for a in answers])
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            peer.inject_document(
                CHAT, PDF, mime_type="application/pdf", file_name="r.pdf", caption="What is it?"
            )
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(1)
            peer.inject_document(CHAT, SOURCE, mime_type="text/x-python", file_name="x.py")
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(2)
            peer.inject_message(CHAT, "What grew, per page 2?")
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(3)
        assert peer.texts(CHAT) == answers
        first, second, third = provider.requests
        url = f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"
        content = _user_content(first.json)
        assert content[0] == {"type": "text", "text": "What is it?"}
        assert "untrusted input" in content[1]["text"]
        assert content[2] == {"type": "file", "file": {"filename": "r.pdf", "file_data": url}}
        (part,) = _user_content(second.json)
        assert part["text"].startswith('<document name="x.py" type="text/x-python">\n')
        assert "print('hi')" in part["text"] and "untrusted input" in part["text"]
        # The next turn reads both documents again, as text: notes and contents, no bytes.
        digest = hashlib.sha256(PDF).hexdigest()[:16]
        pdf_note = f"[document r.pdf, application/pdf, 2 pages, sha256 {digest}]"
        earlier = [m["content"] for m in third.json["messages"] if m["role"] == "user"][:-1]
        assert earlier[0].startswith(pdf_note + '\n<document name="r.pdf"')
        assert "Quarterly report\n\nRevenue grew\n</document>\nWhat is it?" in earlier[0]
        assert earlier[1].startswith("[document x.py, text/x-python, sha256 ")
        assert "print('hi')" in earlier[1]
        assert all(base64.b64encode(PDF).decode() not in m for m in earlier)
        history = Store(tmp_path / "relaybot.db").history("tg", str(CHAT))
        assert history[0].content == earlier[0]


async def test_an_over_size_file_and_an_unsupported_type_get_their_lines(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        text = config_text(peer, provider, tmp_path, agent="max_document_bytes: 1024")
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_document(
                CHAT, SOURCE, mime_type="text/plain", file_name="big.txt", size=2 * 1024 * 1024
            )
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(1)
            peer.inject_document(
                CHAT, b"PK\x03\x04", mime_type="application/zip", file_name="a.zip"
            )
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(2)
        assert peer.texts(CHAT) == [
            "This file is too large (2.0 MB; the limit is 0.0 MB).",
            f"This file type (application/zip) is not supported; send a {ACCEPTED}.",
        ]
        assert provider.requests == []
        # The over-size file was never downloaded.
        assert peer.files.downloads == ["documents/file_2.zip"]
