"""The ``relaybot`` command (architecture §6, §7).

``relaybot run [--config FILE]``   serve (``RELAYBOT_CONFIG`` also names the file); with no file,
                                   the embedded default: the console channel with OpenAI
                                   (``OPENAI_API_KEY``), else Anthropic (``ANTHROPIC_API_KEY``),
                                   else the built-in demo model.
``relaybot check-config FILE``     exit 0, or print ``FILE:LINE: key.path: message`` lines, exit 2.
``relaybot schema``                print the JSON Schema of the config file.
``relaybot tools [--config FILE]`` list every tool the bot would offer (MCP servers are asked).
``relaybot doctor [--config FILE] [--store-only]``
                                   online checks, one ✓/✗ line each
                                   (:mod:`orchestrator.ops.doctor`).
``relaybot migrate-store --from URL --to URL``
                                   copy conversations and run records between stores
                                   (``sqlite:///PATH``, ``postgresql://…``).
``relaybot runs [--limit N] [--chat ID] [--json]``  the latest rounds from the store
                                   (:mod:`orchestrator.ops.runs_cli`).
``relaybot usage [--by user|chat] [--since DATE] [--json]``  tokens and cost per user or chat
                                   (:mod:`orchestrator.ops.usage_cli`).
``relaybot --version``             print the version.

Exit codes: 0 normal end (also after SIGINT/SIGTERM), 1 a piped console run could not produce
an answer or lost the reader of its stdout (or the store, the tools or the ops port failed at
start), 2 bad config or bad
arguments, a store that cannot be written where the config puts it, or every channel refused
for good (a rejected token) (a deploy error: a restart would not help, and systemd's
``RestartPreventExitStatus=2`` stops the restarts). SIGHUP makes ``run`` read its config file
again. Bare ``relaybot``
prints the help. Output cut short by the reader (``relaybot schema | head``) ends the command
quietly with exit 1, as the Python documentation recommends for ``EPIPE``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from config.errors import ConfigError, ConfigIssue
from config.loader import default_config, format_errors, load_config
from config.models import PolicyConfig, RelaybotConfig
from config.storage import StorageConfig
from orchestrator.cli_parser import build_parser

__all__ = ["main"]

log = logging.getLogger("relaybot")

DEFAULT_SOURCE = "<embedded default>"
"""What :func:`storage_problem` is given for the embedded default (no file)."""

DEMO_BANNER = (
    "relaybot: no config file, no OPENAI_API_KEY and no ANTHROPIC_API_KEY — answering with the "
    "built-in DEMO model (canned answers, not a real language model)."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    try:
        return _main(argv)
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:  # a path that cannot be read or written: one line, never a traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"relaybot: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
        _reader_gone()  # stdout may be what failed (a full disk): its final flush stays quiet
        return 1


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, a usage error: argparse printed it
        sys.stdout.flush()
        return exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help()
        return _flush()
    if args.command == "check-config":
        return _check_config(args.file)
    if args.command == "schema":
        from config.schema import json_schema

        sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
        return _flush()
    if args.command in ("run", "doctor", "tools") and (problem := _proxy_problem()):
        print(f"relaybot: {problem}", file=sys.stderr)
        return 2
    if args.command == "tools":
        return _tools(args)
    if args.command == "doctor":
        return _doctor(args)
    if args.command == "migrate-store":
        return _migrate_store(args.source, args.destination)
    if args.command == "runs":
        from orchestrator.ops import runs_cli

        return runs_cli.run(args)
    if args.command == "usage":
        from orchestrator.ops import usage_cli

        return usage_cli.run(args)
    code = _run(args)
    return code if argv is not None else _exit_now_if_threads_hang(code)


def _proxy_problem() -> str | None:
    """What is wrong with the environment's proxy variables (httpx could not read one: every
    request would fail), in one line naming the variable and what it takes; ``None`` if nothing."""
    from providers.provider_client import ProxySettingError, environment_proxies

    try:
        environment_proxies()
    except ProxySettingError as exc:
        if str(exc).lower().startswith("no_proxy"):
            return f"{exc} (it holds host names, IP addresses and .domains, comma-separated)"
        return f"{exc} (a proxy is given as http://host:port, https://… or socks5://…)"
    return None


def _exit_now_if_threads_hang(code: int) -> int:
    """End the process with ``code`` now when a worker thread is still blocked (the console's
    read of stdin, which no cancellation can interrupt): the interpreter would otherwise wait
    for it at exit, and SIGTERM would not end the process until stdin closes (architecture §7).
    Output is flushed first; nothing else is left to clean up once the daemon returned. Only
    for the command itself (``argv`` not given): a caller in the same process keeps it."""
    import threading

    hanging = [
        t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
    ]
    if not hanging:
        return code
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _tools(args: argparse.Namespace) -> int:
    from orchestrator.tools.tools_command import list_tools

    environ = dict(os.environ)
    path = args.config or environ.get("RELAYBOT_CONFIG")
    # The default's model is never asked here: the demo's address only completes the config.
    demo = "http://127.0.0.1:9/v1"
    config = _load(path) if path else _default(environ, demo)
    if config is None:
        return 2
    # The servers' failures (and the lines they wrote) are logged: redacted, as under `run`.
    redact = _setup_logging(config, "text", logging.WARNING)
    return anyio.run(list_tools, config, redact)


def _doctor(args: argparse.Namespace) -> int:
    from orchestrator.ops.doctor import doctor, store_only_config

    environ = dict(os.environ)
    path = args.config or environ.get("RELAYBOT_CONFIG")
    config: RelaybotConfig | None = None
    demo_model = False
    if args.store_only and path:
        try:
            storage = store_only_config(path, environ)
        except (OSError, ValueError) as exc:
            print(f"relaybot: doctor: {str(exc).strip() or type(exc).__name__}", file=sys.stderr)
            return 2
    else:
        demo = "http://127.0.0.1:9/v1"  # the demo model runs only under `run`: not checked
        # The store is one of doctor's own checks (a ✗ line), not a config error.
        config = _load(path, check_store=False) if path else _default(environ, demo)
        if config is None:
            return 2
        storage = config.storage
        if not path:
            from config.default import DEMO_PROVIDER_NAME

            providers = {k: v for k, v in config.providers.items() if k != DEMO_PROVIDER_NAME}
            demo_model = len(providers) < len(config.providers)
            config = config.model_copy(update={"providers": providers})
        if args.store_only:
            config = None
    code = anyio.run(functools.partial(doctor, demo_model=demo_model), config, storage, sys.stdout)
    sys.stdout.flush()
    return code


def _migrate_store(source: str, destination: str) -> int:
    from config.store_url import parse_store_url, without_password, written_password
    from orchestrator.store.copy import copy_store

    for url in (source, destination):
        try:
            parse_store_url(url)
        except ValueError as exc:
            print(f"relaybot: migrate-store: {exc}", file=sys.stderr)
            return 2
        if written_password(url):  # a command line is visible to every user (ps)
            print(
                "relaybot: migrate-store: a password in the URL is not accepted on the command "
                "line: set PGPASSWORD in the environment",
                file=sys.stderr,
            )
            return 2
    read = parse_store_url(source)
    if read.kind == "sqlite" and not Path(read.target).is_file():  # opening would create it
        hint = ""
        if not Path(read.target).is_absolute() and Path("/", read.target).is_file():
            hint = (
                f" (relative to the current directory; for /{read.target} write "
                f"sqlite:////{read.target}: three slashes, then the absolute path)"
            )
        print(f"relaybot: migrate-store: no store at {read.target}{hint}", file=sys.stderr)
        return 1
    try:
        copied = anyio.run(copy_store, source, destination)
    except Exception as exc:  # the stores' errors, CopyRefused: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        first = without_password(without_password(first, source), destination)
        print(f"relaybot: migrate-store: {first}", file=sys.stderr)
        return 1
    print(f"copied {copied.summary()}")
    return _flush()


def _flush() -> int:
    sys.stdout.flush()  # a closed pipe shows here, inside main's BrokenPipeError handler
    return 0


def _reader_gone() -> int:
    """The reader of stdout went away (``| head``): end quietly. stdout is pointed at devnull so
    the interpreter's final flush does not report the error again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return 1


def _load(
    path: str, warnings: list[ConfigIssue] | None = None, *, check_store: bool = True
) -> RelaybotConfig | None:
    """Load and check ``path`` as ``run`` will use it; print the errors and return None if bad.

    Beyond the schema, the checks of :mod:`orchestrator.ops.config_checks` run in the same pass (the
    tools, the hook's import, the secret patterns; warnings for channel kinds this version
    cannot start), so ``check-config`` catches what ``run`` would.
    """
    from orchestrator.ops.config_checks import RUN_CHECKS

    try:
        config = load_config(path, checks=RUN_CHECKS, warnings=warnings)
    except ConfigError as exc:
        print(format_errors(exc), file=sys.stderr)
        return None
    problem = storage_problem(path, config.storage) if check_store else None
    if problem is not None:
        print(problem, file=sys.stderr)
        return None
    return config


def storage_problem(path: str, storage: StorageConfig) -> str | None:
    """``FILE: storage.path: …`` when the SQLite store cannot be written where the config puts
    it (a relative path is in the state directory, architecture §6), else None."""
    from config.storage import state_directory, unwritable_reason

    if storage.shared:
        return None
    store = Path(storage.store_url().removeprefix("sqlite:///"))
    reason = unwritable_reason(store)
    if reason is None:
        return None
    key = "storage.url" if storage.url is not None else "storage.path"
    state = state_directory(os.environ)
    if path == DEFAULT_SOURCE:
        return (
            f"relaybot: the embedded default's store: {reason} (it is in $XDG_DATA_HOME/relaybot, "
            "default ~/.local/share/relaybot: make that writable, or give a config file)"
        )
    return (
        f"{path}: {key}: {reason} (a relative path is in {state}: $STATE_DIRECTORY, else "
        "$XDG_DATA_HOME/relaybot; give the service a writable directory there, or an "
        "absolute path)"
    )


def _check_config(path: str) -> int:
    warnings: list[ConfigIssue] = []
    if _load(path, warnings) is None:
        return 2
    if warnings:
        print("\n".join(str(w) for w in warnings), file=sys.stderr)
        count = len(warnings)
        print(f"{path}: valid, with {count} warning{'s' if count != 1 else ''}")
    else:
        print(f"{path}: ok")
    return _flush()


def _run(args: argparse.Namespace) -> int:
    from orchestrator.ops.process import hold_hangups

    hold_hangups()  # (held already when started as `relaybot`: orchestrator/entry.py)
    environ = dict(os.environ)
    path = args.config or environ.get("RELAYBOT_CONFIG")
    config: RelaybotConfig | None = None
    warnings: list[ConfigIssue] = []
    if path:
        config = _load(path, warnings)
        if config is None:
            return 2
    interactive = sys.stdout.isatty() and (
        config is None or all(c.kind == "console" for c in config.channels.values())
    )
    level_name = (args.log_level or ("warning" if interactive else "info")).upper()
    _setup_logging(config, args.log_format, getattr(logging, level_name, logging.INFO))
    for warning in warnings:  # what check-config would say (an empty allowed_users, a bare $)
        log.warning("%s", warning)
    from orchestrator.ops.process import loop_options, tune_collector

    tune_collector()
    try:
        code = anyio.run(_serve, config, environ, path, backend_options=loop_options())
    except KeyboardInterrupt:
        code = 0
    _let_go_of_a_closed_terminal()
    return code


def _let_go_of_a_closed_terminal() -> None:
    """Once the terminal was closed (its writes fail with ``EIO``), stdout and stderr are pointed
    at devnull, so the interpreter's final flush of what is left for it does not fail the exit
    (status 120): the bot ended as at the end of its input."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, stream.fileno())
            finally:
                os.close(devnull)


def _setup_logging(config: RelaybotConfig | None, fmt: str, level: int) -> Callable[[str], str]:
    """Log redacted by ``config``'s policy; returns that redaction, for text printed beside."""
    from orchestrator.ops.logsetup import setup_logging
    from orchestrator.policy import OutboundPolicy

    policy = OutboundPolicy.from_config(config.policy if config else PolicyConfig())
    setup_logging(policy.redact, fmt="json" if fmt == "json" else "text", level=level)
    return policy.redact


async def _serve(
    config: RelaybotConfig | None, environ: dict[str, str], path: str | None = None
) -> int:
    from orchestrator.ops.daemon import serve

    if config is not None:
        return await serve(config, storage_path=Path(config.storage.path), config_path=path)
    from config.default import default_store_path

    problem = storage_problem(DEFAULT_SOURCE, StorageConfig(path=str(default_store_path(environ))))
    if problem is not None:  # the embedded default's store, checked as a file's would be
        print(problem, file=sys.stderr)
        return 2
    if environ.get("OPENAI_API_KEY") or environ.get("ANTHROPIC_API_KEY"):
        default = _default(environ, None)  # the environment's values checked before any use
        if default is None:
            return 2
        listed = await _first_listed_model(environ, default)
        if listed is not None:
            default = default_config(environ, demo_base_url=None, listed_model=listed)
        return await serve(default, storage_path=Path(default.storage.path))
    from orchestrator.ops.demo_model import DemoModelServer

    async with anyio.create_task_group() as tg:
        demo = DemoModelServer()
        await demo.start(tg)
        print(DEMO_BANNER, file=sys.stderr)
        default = default_config(environ, demo_base_url=demo.base_url)
        code = await serve(default, storage_path=Path(default.storage.path))
        tg.cancel_scope.cancel()
    return code


def _default(environ: dict[str, str], demo_base_url: str | None) -> RelaybotConfig | None:
    """The embedded default config (:func:`config.loader.default_config`); ``None`` once what
    is wrong with the environment's values was printed, one line each, naming the variable."""
    from config.default import environment_problems

    try:
        return default_config(environ, demo_base_url=demo_base_url)
    except ConfigError as exc:
        for line in environment_problems(exc.errors):
            print(line, file=sys.stderr)
        return None


async def _first_listed_model(environ: dict[str, str], default: RelaybotConfig) -> str | None:
    """With ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` but no ``OPENAI_MODEL``: the first model
    that server lists, said in one banner line on stderr (``None`` otherwise, or when the
    server lists none: the default model is used and the line says why). ``default``: the
    embedded default, its ``openai`` provider checked."""
    if not environ.get("OPENAI_API_KEY") or environ.get("OPENAI_MODEL"):
        return None
    base_url = environ.get("OPENAI_BASE_URL")
    if not base_url:
        return None
    from config.default import OPENAI_MODEL, OPENAI_PROVIDER_NAME
    from providers.errors import ProviderError
    from providers.model_list import list_models

    config = default.providers[OPENAI_PROVIDER_NAME]
    try:
        names = await list_models(config)
    except ProviderError as exc:
        names, why = [], f"its models could not be listed ({exc.message})"
    else:
        why = "it lists no models"
    if names:
        print(
            f"relaybot: model {names[0]}, the first that {base_url} lists "
            "(OPENAI_MODEL chooses another)",
            file=sys.stderr,
        )
        return names[0]
    print(
        f"relaybot: model {OPENAI_MODEL}: {base_url} was asked for its models, but {why}; "
        "set OPENAI_MODEL",
        file=sys.stderr,
    )
    return None


if __name__ == "__main__":
    sys.exit(main())
