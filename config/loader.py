"""Load and validate a config file, reporting every problem as ``FILE:LINE: key.path: message``.

Theory of operation
-------------------
1. :func:`config.source.read_yaml` turns the text into plain data plus a line for every key
   path, interpolating ``${VAR}`` references; syntax and interpolation problems become issues.
2. ``agent.providers`` is checked against the keys of ``providers`` on the raw data, so an
   unknown name is reported even when other errors keep pydantic's model validator from running.
3. :class:`RelaybotConfig` validates the data. Each pydantic error location is mapped back to
   a key path and a line: discriminator tags (``channels.tg.telegram.token``) and union member
   tags (``allowed_users.0.str``) are stripped by walking the location against the data; a
   missing key gets the line of its parent mapping; a :class:`LocatedValueError` raised by a model
   validator is reported at the key it names. Errors under a path whose value already failed in
   step 1 are dropped (they would repeat it).
4. The ``checks`` the caller passes (:mod:`config.checks`: tool names, the hook's import, channel
   kinds this version can start) run on every section that is valid on its own, so their
   problems are reported in the same pass, at their lines; a check may report warnings only.
5. Messages are ours (:mod:`config.messages`), written from the error type and its context,
   never from the input: a value may be a secret or come from the environment, and is never
   shown. The one name shown is an unknown provider written in the file. As a last line of
   defence, any text read from the environment is masked in every message.

All issues are raised together in one :class:`ConfigError`, sorted by line. A file larger than
:data:`~config.source.MAX_FILE_BYTES` or nested deeper than :data:`~config.source.MAX_DEPTH` is
one issue.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from config.checks import SectionCheck, run_checks
from config.default import (
    DEFAULT_SOURCE_NAME,
    PROVIDER_VARIABLES,
    default_data,
    default_yaml_text,
)
from config.errors import ConfigError, ConfigIssue, Loc, LocatedValueError, format_path
from config.messages import error_message, join_union_messages
from config.models import RelaybotConfig, unknown_provider_message, unknown_providers
from config.source import MAX_FILE_BYTES, TOO_LARGE_MESSAGE, SourceDocument, read_yaml
from config.storage import WRITTEN_URL_CONTEXT, StorageConfig, state_directory

__all__ = [
    "config_from_document",
    "default_config",
    "format_errors",
    "load_config",
    "load_config_text",
    "load_storage_config",
]


def load_config(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    checks: Sequence[SectionCheck] = (),
    warnings: list[ConfigIssue] | None = None,
) -> RelaybotConfig:
    """Read, interpolate and validate a config file.

    A relative ``storage.path`` (or ``sqlite:///`` path of ``storage.url``) is resolved in the
    state directory (:func:`config.storage.state_directory`: ``$STATE_DIRECTORY``, else
    ``$XDG_DATA_HOME/relaybot``), never beside the file, which a service may only read: the
    returned ``config.storage.path`` is absolute (``~`` expanded).

    Args:
        path: the YAML file; its name as given is the ``FILE`` of every message.
        environ: the environment for ``${VAR}`` references (default: ``os.environ``).
        checks: checks made after schema validation (see :func:`config_from_document`).
        warnings: when the config is usable, the warnings found are appended here.

    Raises:
        ConfigError: the file cannot be read, is larger than :data:`~config.source.MAX_FILE_BYTES`,
            is not UTF-8, not YAML, or not a valid config; it carries every issue found.
    """
    source = str(path)
    text = _read_text(path)
    return load_config_text(
        text,
        source_name=source,
        environ=environ,
        base_dir=state_directory(os.environ if environ is None else environ),
        checks=checks,
        warnings=warnings,
    )


def _read_text(path: str | Path) -> str:
    """The file's text; raises :class:`ConfigError` (one issue) when it cannot be read, is too
    large or is not UTF-8."""
    source = str(path)
    try:
        with Path(path).open("rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            [ConfigIssue(source, None, "", f"cannot read the file: {reason}")]
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError([ConfigIssue(source, None, "", TOO_LARGE_MESSAGE)])
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError([ConfigIssue(source, line, "", "the file is not valid UTF-8")]) from None


def load_config_text(
    text: str,
    *,
    source_name: str = "<string>",
    environ: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    checks: Sequence[SectionCheck] = (),
    warnings: list[ConfigIssue] | None = None,
) -> RelaybotConfig:
    """Validate config text (see :func:`load_config`).

    Args:
        text: the YAML document.
        source_name: the ``FILE`` of every message.
        environ: the environment for ``${VAR}`` references (default: ``os.environ``).
        base_dir: directory a relative ``storage.path`` is resolved against; ``None`` leaves
            the path as written.
        checks: checks made after schema validation (see :func:`config_from_document`).
        warnings: when the config is usable, the warnings found are appended here.

    Raises:
        ConfigError: every issue found.
    """
    doc = read_yaml(
        text, source_name=source_name, environ=os.environ if environ is None else environ
    )
    config = config_from_document(doc, source_name=source_name, checks=checks, warnings=warnings)
    if base_dir is not None:
        config = config.model_copy(update={"storage": _resolved(config.storage, base_dir)})
    return config


def _resolved(storage: StorageConfig, base_dir: str | Path) -> StorageConfig:
    return storage.model_copy(
        update={
            "path": str(storage.resolved_path(base_dir)),
            "url": storage.resolved_url(base_dir),
        }
    )


def _validation_context(doc: SourceDocument) -> dict[str, Any]:
    """What validators need to know of the text as written (``storage.url``'s password)."""
    written = doc.written.get(("storage", "url"))
    return {} if written is None else {WRITTEN_URL_CONTEXT: written}


class _StorageSection(BaseModel):
    """The ``storage`` section alone; every other key of the file is left unread."""

    model_config = ConfigDict(extra="ignore")
    storage: StorageConfig = Field(default_factory=StorageConfig)


def load_storage_config(
    path: str | Path, *, environ: Mapping[str, str] | None = None
) -> StorageConfig:
    """Read only the ``storage`` section of a config file, resolved as :func:`load_config`
    resolves it (a relative path in the state directory).

    For the commands that only open the store (``relaybot runs``): the secrets the rest of the
    file reads as ``${VAR}`` need not be set, and problems elsewhere in the file are not
    reported; the YAML must still parse.

    Raises:
        ConfigError: the file cannot be read or parsed, or its ``storage`` section is not valid
            (``FILE:LINE: storage.KEY: message`` issues).
    """
    source = str(path)
    environ = os.environ if environ is None else environ
    text = _read_text(path)
    # An unset ${VAR} of another section is an issue at its own path, left out below.
    doc = read_yaml(text, source_name=source, environ=environ)
    issues = [issue for issue in doc.issues if _storage_or_file(issue.path)]
    section: StorageConfig | None = None
    if doc.data is not None:
        data = doc.data if isinstance(doc.data, dict) else {}
        subset = {"storage": data["storage"]} if "storage" in data else {}
        try:
            section = _StorageSection.model_validate(
                subset, context=_validation_context(doc)
            ).storage
        except ValidationError as exc:
            issues += list(_validation_issues(exc, doc, source))
    unique = list(dict.fromkeys(_scrub(issue, doc.environment_values) for issue in issues))
    unique.sort(key=lambda issue: 0 if issue.line is None else issue.line)
    errors = [issue for issue in unique if not issue.warning]
    if section is None or errors:
        raise ConfigError(errors or unique)
    return _resolved(section, state_directory(environ))


def _storage_or_file(path: str) -> bool:
    return path in ("", "yaml", "storage") or path.startswith(("storage.", "storage["))


def format_errors(error: ConfigError) -> str:
    """The text ``relaybot check-config`` and ``relaybot run`` print to stderr: one
    ``FILE:LINE: key.path: message`` line per issue, in line order, no trailing newline."""
    return "\n".join(str(issue) for issue in error.errors)


def default_config(
    environ: Mapping[str, str] | None = None,
    *,
    demo_base_url: str | None = None,
    listed_model: str | None = None,
) -> RelaybotConfig:
    """The embedded default config of ``relaybot run`` without a file (architecture §7).

    ``config/default.yaml`` (the console channel only, no metrics server) completed by
    :func:`config.default.default_data`: with ``OPENAI_API_KEY`` set, the ``openai`` provider
    (``openai_chat``, model ``$OPENAI_MODEL``, else ``listed_model`` — the first model the
    ``OPENAI_BASE_URL`` server lists — else ``gpt-4.1-mini``; ``https://api.openai.com/v1``
    unless ``OPENAI_BASE_URL`` is set); else with ``ANTHROPIC_API_KEY``, the ``anthropic``
    provider (model ``$ANTHROPIC_MODEL``, default ``claude-haiku-4-5``; ``$ANTHROPIC_BASE_URL``
    when set); else the ``demo`` provider at ``demo_base_url``. ``storage.path`` is
    ``$XDG_DATA_HOME/relaybot/relaybot.db`` (default ``~/.local/share/relaybot/relaybot.db``).

    Args:
        environ: the environment (default: ``os.environ``).
        demo_base_url: the demo model server's API root, e.g. ``http://127.0.0.1:PORT/v1``;
            ignored when ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY`` is set.
        listed_model: see :func:`config.default.default_data`.

    Raises:
        ValueError: none of ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` and ``demo_base_url``
            is given.
    """
    environ = os.environ if environ is None else environ
    doc = read_yaml(default_yaml_text(), source_name=DEFAULT_SOURCE_NAME, environ=environ)
    doc.data = default_data(
        doc.data, environ, demo_base_url=demo_base_url, listed_model=listed_model
    )
    config = config_from_document(doc, source_name=DEFAULT_SOURCE_NAME)
    for name, provider in config.providers.items():
        provider.read_from(PROVIDER_VARIABLES.get(name, {}))
    return config


def config_from_document(
    doc: SourceDocument,
    *,
    source_name: str,
    checks: Sequence[SectionCheck] = (),
    warnings: list[ConfigIssue] | None = None,
) -> RelaybotConfig:
    """Validate data read by :func:`config.source.read_yaml`, then run ``checks``.

    Args:
        doc: the document.
        source_name: the ``FILE`` of every message.
        checks: checks made after schema validation (:mod:`config.checks`); each runs when its
            section is valid, whatever the rest of the file holds.
        warnings: when the config is usable, the warnings found are appended here.

    Raises:
        ConfigError: ``doc.issues``, every validation issue and every issue of ``checks``
            (warnings included), when at least one of them is not a warning.
    """
    issues = list(doc.issues)
    config: RelaybotConfig | None = None
    if doc.data is not None:
        reference_issues = list(_provider_reference_issues(doc, source_name))
        try:
            config = RelaybotConfig.model_validate(doc.data, context=_validation_context(doc))
        except ValidationError as exc:
            issues += reference_issues
            seen = {issue.path for issue in reference_issues}
            issues += [i for i in _validation_issues(exc, doc, source_name) if i.path not in seen]
        issues += run_checks(doc, checks, source_name=source_name)
    unique = list(dict.fromkeys(_scrub(issue, doc.environment_values) for issue in issues))
    unique.sort(key=lambda issue: 0 if issue.line is None else issue.line)
    if config is not None and all(issue.warning for issue in unique):
        for name, provider in config.providers.items():
            provider.read_from(
                {
                    str(loc[2]): names[0]
                    for loc, names in doc.variables.items()
                    if len(loc) == 3 and loc[:2] == ("providers", name)
                }
            )
        if warnings is not None:
            warnings.extend(unique)
        return config
    raise ConfigError(unique)


MIN_SCRUBBED_LENGTH = 6
"""Environment values at least this long are masked wherever a message would contain them."""


def _scrub(issue: ConfigIssue, environment_values: Collection[str]) -> ConfigIssue:
    """Last line of defence: messages are built without input values, but a validator's message
    may quote a value that was valid (``pattern 'x' does not compile``): mask any text that came
    from the environment. Short values are left (masking ``1`` would garble the message)."""
    message = issue.message
    for value in sorted(environment_values, key=len, reverse=True):
        if len(value) >= MIN_SCRUBBED_LENGTH and value in message:
            message = message.replace(value, "***")
    return issue if message == issue.message else replace(issue, message=message)


# -- step 2: references between sections ------------------------------------------------------


def _provider_reference_issues(doc: SourceDocument, source: str) -> Iterator[ConfigIssue]:
    data = doc.data
    agent = data.get("agent") if isinstance(data, dict) else None
    chain = agent.get("providers") if isinstance(agent, dict) else None
    configured = data.get("providers", {}) if isinstance(data, dict) else None
    if not isinstance(chain, list) or not isinstance(configured, dict):
        return
    for index in unknown_providers(configured, chain):
        loc: Loc = ("agent", "providers", index)
        if _under(loc, doc.failed):
            continue
        name = None if loc in doc.from_environment else chain[index]
        message = unknown_provider_message(name, configured)
        yield ConfigIssue(source, doc.line_of(loc), format_path(loc), message)


# -- step 3: pydantic locations -> key paths and lines ----------------------------------------


def _validation_issues(
    exc: ValidationError, doc: SourceDocument, source: str
) -> Iterator[ConfigIssue]:
    branch_messages: dict[Loc, list[str]] = {}  # failures of each member of a plain union
    for error in exc.errors(include_url=False, include_input=False):
        tagged: Loc = tuple(error["loc"])
        loc, union_branch = _strip_tags(tagged, doc.data, missing=error["type"] == "missing")
        context = error.get("ctx") or {}
        located = context.get("error")
        if isinstance(located, LocatedValueError):
            for relative, message in located.issues:
                full = (*loc, *relative)
                if not _under(full, doc.failed):
                    yield ConfigIssue(source, doc.line_of(full), format_path(full), message)
            continue
        if error["type"] in ("union_tag_not_found", "union_tag_invalid"):
            loc = (*loc, str(context.get("discriminator", "kind")).strip("'"))
        if _under(loc, doc.failed):
            continue
        message = error_message(error, tagged)
        if union_branch:
            branch_messages.setdefault(loc, []).append(message)
            continue
        yield ConfigIssue(source, doc.line_of(loc), format_path(loc), message)
    for loc, messages in branch_messages.items():
        yield ConfigIssue(source, doc.line_of(loc), format_path(loc), join_union_messages(messages))


def _strip_tags(tagged: Loc, data: Any, *, missing: bool) -> tuple[Loc, bool]:
    """Drop union tags from a pydantic location by walking it against the input data.

    A part that names an existing key or index is kept, and so is the last part of a
    ``missing`` error (the absent key); any other part is a tag. Returns the path and whether a
    plain union's member tag (not the ``kind`` discriminator) was dropped.
    """
    path: list[str | int] = []
    union_branch = False
    current = data
    for position, part in enumerate(tagged):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        elif missing and position == len(tagged) - 1:
            path.append(part)
            break
        else:
            if not (isinstance(current, dict) and current.get("kind") == part):
                union_branch = True
            continue
        path.append(part)
    return tuple(path), union_branch


def _under(loc: Loc, roots: Collection[Loc]) -> bool:
    return any(loc[: len(root)] == root for root in roots)
