"""``relaybot doctor``: online checks of a config, one line each (architecture §7).

Theory of operation
-------------------
Each check is a coroutine that returns :class:`Check` results — ``ok``, what was checked and,
when it failed, what to do — and never raises: any exception becomes a ✗ line in the check's own
words (its first line; never a traceback). The checks:

* every channel's credentials, by plain HTTP to the configured base URL: Telegram
  ``GET {base_url}{token}/getMe``, Discord ``GET {api_base_url}/users/@me`` with
  ``Authorization: Bot``, Matrix ``GET /_matrix/client/v3/account/whoami`` with the access token
  (a password login is not tried: it would add a device; the homeserver's
  ``/_matrix/client/versions`` is asked instead); the console needs nothing;
* every provider's key and model: its models endpoint (:mod:`providers.model_list`) must list
  the model; a server without one (404) gets one tiny blocking request (``max_tokens`` 1);
  a failure reads as the interrupted marker would (:mod:`orchestrator.turn.failure_causes`);
* the store: connect, migrate (``open``), write and read back one channel-state row
  (channel ``relaybot-doctor``), close;
* the ops port (``server.listen``): can it be bound (then it is released at once); port 0 is
  any free port, chosen at start: nothing to check.

The embedded default's demo model runs only under ``relaybot run``: it gets a line saying so
(``demo_model``), not a check.

:func:`doctor` prints the lines and returns the exit code: 0 when every check passed, else 1.
:func:`store_only_config` reads only the ``storage`` section of a file, so the secrets of the
other sections need not be in the environment.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import httpx

from channels.console.kind import ConsoleChannelConfig
from channels.discord.kind import DiscordChannelConfig
from channels.matrix.kind import MatrixChannelConfig
from channels.telegram.kind import TelegramChannelConfig
from config.models import ProviderConfig, RelaybotConfig
from config.storage import StorageConfig
from config.store_url import masked_store_url, without_password
from orchestrator.turn.failure_causes import FailureContext, unreachable_cause, user_cause
from providers.errors import (
    ModelNotFound,
    ProviderBadRequest,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
)
from providers.provider_client import environment_mounts
from providers.transport_errors import translated

__all__ = [
    "HTTP_TIMEOUT_SECS",
    "Check",
    "check_channel",
    "check_ops_port",
    "check_provider",
    "check_store",
    "doctor",
    "store_only_config",
]

HTTP_TIMEOUT_SECS = 10.0
"""Bound of each HTTP request of a check, in seconds."""

DISCORD_API = "https://discord.com/api/v10"
DOCTOR_CHANNEL = "relaybot-doctor"
"""The channel name of the store row the store check writes."""


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report: ``ok``, the subject (``channel telegram``) and the detail
    (what was found, or what to do)."""

    ok: bool
    subject: str
    detail: str

    def line(self) -> str:
        return f"{'✓' if self.ok else '✗'} {self.subject}: {self.detail}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def _get(url: str, headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
    """GET ``url`` through the environment's proxies as a provider's client goes (a failure
    to reach or pass a proxy names it): (status, JSON body or ``None``).

    Raises:
        ProviderConnectionError: no answer (typed by cause); ProviderTimeout: none in time.
    """
    context = httpx.create_ssl_context(trust_env=True)
    mounts = environment_mounts(httpx.Limits(), context)
    async with httpx.AsyncClient(
        timeout=HTTP_TIMEOUT_SECS, verify=context, mounts=mounts, trust_env=True
    ) as client:
        try:
            response = await client.get(url, headers=dict(headers or {}))
        except httpx.TransportError as exc:
            raise translated(exc, url, "post") from exc
    try:
        body = response.json()
    except ValueError:
        body = None
    return response.status_code, body


def _unreachable(subject: str, exc: BaseException, where: str) -> Check:
    """A channel's server could not be asked: the cause names the channel's setting only (or,
    when the failure was at a proxy, the proxy and the variable that named it)."""
    if isinstance(exc, ProviderConnectionError):
        host = exc.host or "the server"
        return Check(False, subject, unreachable_cause(exc, host, where, service="the server"))
    if isinstance(exc, ProviderTimeout) and exc.proxy is not None:
        named, variable = f"{exc.proxy.host} ({exc.proxy.variable})", exc.proxy.variable
        return Check(
            False, subject, f"no connection to the proxy {named} in time (check {variable})"
        )
    if isinstance(exc, ProviderTimeout):
        return Check(False, subject, f"the server did not answer in time (check {where})")
    return Check(False, subject, f"{_first_line(exc)} (check {where})")


async def check_channel(name: str, config: Any) -> Check:
    """The credentials of one channel (see the module docstring)."""
    subject = f"channel {name}"
    try:
        if isinstance(config, TelegramChannelConfig):
            url = f"{config.base_url}{config.token.get_secret_value()}/getMe"
            status, body = await _get(url)
            if status == 200 and isinstance(body, dict) and body.get("ok"):
                user = body.get("result") or {}
                return Check(True, subject, f"bot @{user.get('username')} (getMe)")
            if status in (401, 404):
                return Check(
                    False,
                    subject,
                    f"the token was refused ({status}): check "
                    f"channels.{name}.token (a new one from @BotFather)",
                )
            return Check(False, subject, f"getMe answered {status}: try again later")
        if isinstance(config, DiscordChannelConfig):
            base = (config.api_base_url or DISCORD_API).rstrip("/")
            headers = {"Authorization": f"Bot {config.token.get_secret_value()}"}
            status, body = await _get(f"{base}/users/@me", headers)
            if status == 200 and isinstance(body, dict):
                return Check(True, subject, f"bot {body.get('username')} (users/@me)")
            if status in (401, 403):
                return Check(
                    False,
                    subject,
                    f"the token was refused ({status}): check "
                    f"channels.{name}.token (developer portal, Bot, Reset Token)",
                )
            return Check(False, subject, f"users/@me answered {status}: try again later")
        if isinstance(config, MatrixChannelConfig):
            return await _check_matrix(subject, name, config)
        if isinstance(config, ConsoleChannelConfig):
            return Check(True, subject, "the terminal (nothing to check)")
        return Check(True, subject, f"kind {config.kind}: no online check")
    except Exception as exc:  # one line per check, never a traceback
        return _unreachable(subject, exc, f"channels.{name}{_server_setting(config)}")


def _server_setting(config: Any) -> str:
    """The key of a channel's config that names its server (``.base_url``), or ``""``."""
    for key in ("base_url", "api_base_url", "homeserver"):
        if hasattr(config, key):
            return f".{key}"
    return ""


async def _check_matrix(subject: str, name: str, config: MatrixChannelConfig) -> Check:
    base = config.homeserver.rstrip("/")
    if config.access_token is None:
        status, _ = await _get(f"{base}/_matrix/client/versions")
        if status == 200:
            return Check(
                True, subject, "homeserver answers (password login not tried: it adds a device)"
            )
        return Check(False, subject, f"/_matrix/client/versions answered {status}")
    headers = {"Authorization": f"Bearer {config.access_token.get_secret_value()}"}
    status, body = await _get(f"{base}/_matrix/client/v3/account/whoami", headers)
    if status == 200 and isinstance(body, dict):
        who = body.get("user_id")
        if who != config.user_id:
            return Check(
                False,
                subject,
                f"the token is {who}'s, not {config.user_id}: check "
                f"channels.{name}.user_id / access_token",
            )
        return Check(True, subject, f"{who} (whoami)")
    if status in (401, 403):
        return Check(
            False,
            subject,
            f"the access token was refused ({status}): check channels.{name}.access_token",
        )
    return Check(False, subject, f"whoami answered {status}: try again later")


async def check_provider(name: str, config: ProviderConfig) -> Check:
    """The key and model of one provider (see the module docstring)."""
    from providers.model_list import list_models

    subject = f"provider {name}"
    context = FailureContext(name, config)
    where = config.resolved_base_url
    try:
        try:
            names = await list_models(config, timeout_secs=HTTP_TIMEOUT_SECS)
        except ProviderBadRequest as exc:
            if exc.status_code not in (404, 405):
                raise
            return await _tiny_request(subject, name, config, context)
        if config.model not in names:
            missing = ModelNotFound(f"{config.model} is not listed", model=config.model)
            missing.available = tuple(names)
            return Check(False, subject, user_cause(missing, context))
        return Check(True, subject, f"model {config.model} is served by {where}")
    except ProviderError as exc:
        return Check(False, subject, user_cause(exc, context))
    except Exception as exc:
        return Check(False, subject, _first_line(exc))


async def _tiny_request(
    subject: str, name: str, config: ProviderConfig, context: FailureContext
) -> Check:
    """A server without a models list: one blocking request of one output token."""
    from providers.base import ChatMessage, ChatRequest
    from providers.registry import build_provider

    tiny = config.model_copy(update={"max_tokens": 1, "max_retries": 0})
    provider = build_provider(name, tiny)
    try:
        await provider.complete(ChatRequest(messages=(ChatMessage("user", "ping"),)))
    except ProviderError as exc:
        return Check(False, subject, user_cause(exc, context))
    finally:
        await provider.aclose()
    return Check(True, subject, f"model {config.model} answered a one-token request")


async def check_store(storage: StorageConfig) -> Check:
    """Connect, migrate, write and read back one row, close."""
    from orchestrator.store import store_for

    url = storage.store_url()
    subject = f"store {masked_store_url(url)}"
    try:
        store = store_for(url, pool_size=1)
        try:
            await store.open()
            stamp = str(time.time())
            await store.set_state(DOCTOR_CHANNEL, "checked_at", stamp)
            if await store.get_state(DOCTOR_CHANNEL, "checked_at") != stamp:
                return Check(False, subject, "a row written was not read back")
        finally:
            await store.aclose()
    except Exception as exc:
        why = without_password(_first_line(exc), url)
        return Check(False, subject, f"{why} (check storage.path / storage.url)")
    return Check(True, subject, "connected, schema up to date, written")


def check_ops_port(listen: str | None) -> Check | None:
    """Can ``server.listen`` (``HOST:PORT``) be bound; ``None`` when it is off."""
    if listen is None:
        return None
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    subject = f"ops port {listen}"
    if int(port) == 0:
        return Check(True, subject, "a free port, chosen at start (nothing to check)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, int(port)))
    except OSError as exc:
        reason = exc.strerror or _first_line(exc)
        return Check(False, subject, f"cannot listen: {reason} (change server.listen)")
    return Check(True, subject, "free")


def store_only_config(path: str, environ: Mapping[str, str]) -> StorageConfig:
    """The ``storage`` section of the file ``path`` alone
    (:func:`config.loader.load_storage_config`: ``${VAR}`` interpolated in it only, a relative
    path in the state directory, as ``relaybot run`` resolves it).

    Raises:
        ValueError: the file cannot be read, is not YAML, or the section does not validate (the
            first problem, one line).
    """
    from config.errors import ConfigError
    from config.loader import load_storage_config

    try:
        return load_storage_config(path, environ=environ)
    except ConfigError as exc:
        raise ValueError(str(exc.errors[0])) from None


DEMO_MODEL_LINE = Check(
    True,
    "model",
    "the built-in demo model, started by relaybot run (nothing to check; set OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY for a real one)",
)


async def doctor(
    config: RelaybotConfig | None, storage: StorageConfig, out: TextIO, *, demo_model: bool = False
) -> int:
    """Run the checks of ``config`` (all of them; only the store when ``config`` is None),
    print one line each to ``out``; 0 when all passed, else 1. ``demo_model``: the config
    answers with the embedded default's demo model (its line, :data:`DEMO_MODEL_LINE`)."""
    ok = True
    if config is not None:
        for name, channel in config.channels.items():
            ok &= _show(await check_channel(name, channel), out)
        for name, provider in config.providers.items():
            ok &= _show(await check_provider(name, provider), out)
        if demo_model:
            ok &= _show(DEMO_MODEL_LINE, out)
    ok &= _show(await check_store(storage), out)
    if config is not None:
        ok &= _show(check_ops_port(config.server.listen), out)
    return 0 if ok else 1


def _show(check: Check | None, out: TextIO) -> bool:
    """Print ``check``'s line to ``out`` as soon as it is known (nothing for ``None``, a check
    that does not apply); whether it passed."""
    if check is None:
        return True
    print(check.line(), file=out, flush=True)
    return check.ok
