"""Speech through an OpenAI-compatible server: voice notes to text, answers to voice notes
(architecture §3 "Inputs").

Theory of operation
-------------------
Both requests go to the ``base_url`` of the provider named by ``speech.provider`` with its key
(``Authorization: Bearer``), bounded as a whole by ``speech.timeout_secs``:

* :func:`transcribe`: ``POST {base_url}/audio/transcriptions`` as ``multipart/form-data`` with
  the audio bytes in ``file`` (its name and MIME type), ``model`` and ``response_format=json``;
  the answer is ``{"text": ...}``
  (https://platform.openai.com/docs/api-reference/audio/createTranscription). OpenAI, a local
  faster-whisper or whisper.cpp server answer alike.
* :func:`synthesize`: ``POST {base_url}/audio/speech`` with JSON ``model``, ``input``,
  ``voice`` and ``response_format`` (``opus``: Ogg/Opus, what Telegram shows as a voice note);
  the answer is the audio bytes
  (https://platform.openai.com/docs/api-reference/audio/createSpeech).

Failures are the typed errors of :mod:`providers.transport`, as for model calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from config.models import ProviderConfig, SpeechConfig
from providers.bounded_json import parse_json
from providers.errors import ProviderServerError, ProviderTimeout
from providers.status_errors import error_from_status
from providers.transport import make_client
from providers.transport_errors import Where, provider_error

__all__ = ["SPEECH_FORMAT", "SpeechClient"]

SPEECH_FORMAT = ("opus", "audio/ogg")
"""The ``response_format`` asked of ``/audio/speech`` and the MIME type of what it answers."""


@dataclass(frozen=True)
class SpeechClient:
    """The ``speech`` section with the provider it names (its base URL and key)."""

    speech: SpeechConfig
    provider: ProviderConfig

    def _headers(self) -> dict[str, str]:
        if self.provider.api_key is None:
            return {}
        return {"authorization": f"Bearer {self.provider.api_key.get_secret_value()}"}

    async def _post(self, path: str, **kwargs: Any) -> httpx.Response:
        url = f"{self.provider.resolved_base_url}{path}"
        bound = self.speech.timeout_secs
        client = make_client(max_connections=1, proxies=self.provider.proxy == "environment")
        try:
            with anyio.fail_after(bound):
                response = await client.post(url, headers=self._headers(), **kwargs)
                await response.aread()
        except TimeoutError as exc:
            raise ProviderTimeout(
                f"no answer from {path} within {bound:g} s", phase="total"
            ) from exc
        except Exception as exc:
            raise provider_error(exc, Where(url, "post")) or exc from exc
        finally:
            await client.aclose()
        if response.status_code >= 300:
            raise error_from_status(response.status_code, response.content, response.headers)
        return response

    async def transcribe(self, audio: bytes, *, file_name: str, mime_type: str) -> str:
        """The text spoken in ``audio`` (stripped; may be empty).

        Raises:
            ProviderError: the request failed (typed), or the answer has no ``text``.
        """
        response = await self._post(
            "/audio/transcriptions",
            files={"file": (file_name, audio, mime_type)},
            data={"model": self.speech.model, "response_format": "json"},
        )
        body = parse_json(response.content, what="transcription")
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise ProviderServerError("the transcription answer has no text")
        return text.strip()

    async def synthesize(self, text: str) -> bytes:
        """``text`` spoken, as Ogg/Opus bytes (:data:`SPEECH_FORMAT`).

        Raises:
            ProviderError: the request failed (typed), or the answer is empty.
        """
        response = await self._post(
            "/audio/speech",
            json={
                "model": self.speech.tts_model,
                "input": text,
                "voice": self.speech.voice,
                "response_format": SPEECH_FORMAT[0],
            },
        )
        if not response.content:
            raise ProviderServerError("the speech answer is empty")
        return response.content
