"""What happens to the documents of an inbound message before its turn (architecture §3 "Inputs").

Pure (no I/O; pypdf reads the bytes in memory). :func:`screen_documents` takes the message and
the bounds, and returns the documents to send as :class:`~providers.base.DocumentPart` and the
one line to tell the user, or refuses the message whole — no model call — when one of its
documents is too large, has too many pages, is of a type not taken, could not be fetched or
read: answering a question about a file nobody read would be a guess.

Taken: PDF (its text extracted page by page with pypdf, for the providers that get text) and
text files — plain text, Markdown, CSV, JSON and source code — recognised by MIME type or by
file name extension, decoded as UTF-8 (a NUL byte means binary: not taken).
"""

from __future__ import annotations

import io
import logging
from pathlib import PurePosixPath

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from channels.base import Attachment, InboundMessage
from providers.base import PDF, DocumentPart

__all__ = [
    "ACCEPTED",
    "TEXT_EXTENSIONS",
    "is_document_type",
    "screen_documents",
]

_LOG = logging.getLogger("orchestrator.turn.documents")

ACCEPTED = "PDF or a text file (plain text, Markdown, CSV, JSON or source code)"
"""The types taken, as the user reads them."""

TEXT_EXTENSIONS = frozenset(
    ".txt .text .log .md .markdown .rst .csv .tsv .json .jsonl .yaml .yml .toml .ini .cfg .conf "
    ".xml .html .htm .css .py .pyi .js .mjs .ts .tsx .jsx .java .kt .kts .scala .go .rs .c .h "
    ".cc .cpp .cxx .hpp .cs .swift .m .rb .php .pl .lua .r .jl .sh .bash .zsh .fish .ps1 .sql "
    ".hs .ml .ex .exs .erl .clj .dart .vue .svelte .tex .diff .patch .env .dockerfile".split()
)
"""File name extensions of text files taken whatever MIME type the network gave them (source code
often arrives as ``application/octet-stream``)."""

_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-javascript",
        "application/x-sh",
        "application/x-python",
        "application/sql",
    }
)


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _is_text(attachment: Attachment) -> bool:
    mime = attachment.mime_type.split(";")[0].strip().lower()
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return True
    suffix = PurePosixPath(attachment.file_name or "").suffix.lower()
    return suffix in TEXT_EXTENSIONS


def _is_pdf(attachment: Attachment) -> bool:
    name = (attachment.file_name or "").lower()
    return attachment.mime_type.lower() == PDF or name.endswith(".pdf")


def is_document_type(mime_type: str, file_name: str | None) -> bool:
    """Whether a file of this type is taken as a document (a channel fetches only these)."""
    attachment = Attachment(mime_type, kind="document", file_name=file_name)
    return _is_pdf(attachment) or _is_text(attachment)


def _pdf(name: str, data: bytes, max_pages: int) -> DocumentPart | str:
    """The PDF as a part, or the line saying why not."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            return f"This PDF ({name}) is encrypted; please send it without a password."
        pages = len(reader.pages)
        if pages > max_pages:
            return f"This PDF ({name}) has {pages} pages; the limit is {max_pages}."
        text = "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        _LOG.info("cannot read a PDF: %s", exc)
        return f"This PDF ({name}) could not be read; please check the file and send it again."
    return DocumentPart(name, PDF, data, text.strip(), pages)


def _text(name: str, attachment: Attachment) -> DocumentPart | None:
    if b"\x00" in attachment.data:
        return None
    text = attachment.data.decode("utf-8", errors="replace")
    mime = attachment.mime_type.split(";")[0].strip() or "text/plain"
    if mime == "application/octet-stream":
        mime = "text/plain"
    return DocumentPart(name, mime, attachment.data, text.removeprefix("\ufeff"))


def screen_documents(
    message: InboundMessage, *, max_bytes: int, max_pages: int
) -> tuple[tuple[DocumentPart, ...], str | None]:
    """(the documents to send, the notice for the user or ``None``). A notice with no
    documents while the message has some means the message is refused (see the module
    docstring).

    ``max_bytes``: ``agent.max_document_bytes``; ``max_pages``: ``agent.max_document_pages``.
    """
    parts: list[DocumentPart] = []
    for attachment in message.attachments:
        if attachment.kind != "document":
            continue
        name = attachment.file_name or "document"
        size = max(attachment.size or 0, len(attachment.data))
        if not (_is_pdf(attachment) or _is_text(attachment)):
            return (), (
                f"This file type ({attachment.mime_type or 'unknown'}) is not supported; "
                f"send a {ACCEPTED}."
            )
        if size > max_bytes:
            limit = _megabytes(max_bytes)
            return (), f"This file is too large ({_megabytes(size)}; the limit is {limit})."
        if not attachment.fetched:
            return (), "This file could not be downloaded; please send it again."
        part = _pdf(name, attachment.data, max_pages) if _is_pdf(attachment) else None
        if part is None:
            part = _text(name, attachment)
        if part is None:
            return (), f"This file ({name}) is not text; send a {ACCEPTED}."
        if isinstance(part, str):
            return (), part
        parts.append(part)
    return tuple(parts), None
