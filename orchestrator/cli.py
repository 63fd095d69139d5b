"""The ``relaybot`` command (DESIGN §6, §7).

``relaybot run [--config FILE]``   serve (``RELAYBOT_CONFIG`` also names the file); with no file,
                                   the embedded default: the console channel and, without
                                   ``OPENAI_API_KEY``, the built-in demo model.
``relaybot check-config FILE``     exit 0, or print ``FILE:LINE: key.path: message`` lines, exit 2.
``relaybot schema``                print the JSON Schema of the config file.

Exit codes: 0 normal end (also after SIGINT/SIGTERM), 1 a channel could not start, 2 bad config.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from config.errors import ConfigError
from config.loader import default_config, format_errors, load_config
from config.models import PolicyConfig, RelaybotConfig

__all__ = ["data_dir", "main"]

log = logging.getLogger("relaybot")

DEMO_BANNER = (
    "relaybot: no config file and no OPENAI_API_KEY — answering with the built-in DEMO model "
    "(canned answers, not a real language model)."
)


def data_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/relaybot`` (default ``~/.local/share/relaybot``)."""
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "relaybot"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relaybot", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="serve the configured channels")
    run.add_argument("--config", help="YAML config file (default: $RELAYBOT_CONFIG, else built in)")
    run.add_argument("--log-format", choices=("text", "json"), default="text")
    run.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=None,
        help="default: info (warning for an interactive console)",
    )
    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("file")
    sub.add_parser("schema", help="print the JSON Schema of the config file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check-config":
        return _check_config(args.file)
    if args.command == "schema":
        from config.schema import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    return _run(args)


def _load(path: str) -> RelaybotConfig | None:
    """Load and check ``path`` as ``run`` will use it; print the errors and return None if bad.

    Beyond the file's own validation this imports the ``on_message_sending`` hook, compiles the
    secret patterns and looks up the tools, so ``check-config`` catches what ``run`` would.
    """
    try:
        config = load_config(path)
    except ConfigError as exc:
        print(format_errors(exc), file=sys.stderr)
        return None
    from orchestrator.policy import OutboundPolicy, PolicyError
    from orchestrator.tools import ToolRegistry

    problems: list[str] = []
    try:
        OutboundPolicy.from_config(config.policy)
    except PolicyError as exc:
        problems.append(f"{path}: {exc.key}: {exc.message}")
    try:
        ToolRegistry.from_names(config.agent.tools)
    except KeyError as exc:
        problems.append(f"{path}: agent.tools: {exc.args[0]}")
    if problems:
        print(_mask_referenced_env("\n".join(problems), path), file=sys.stderr)
        return None
    return config


def _mask_referenced_env(text: str, path: str) -> str:
    """Mask the values of the environment variables the file references (``${VAR}``): these
    messages quote a tool name or hook path, which may have come from the environment."""
    try:
        names = set(re.findall(r"\$\{(\w+)", Path(path).read_text(encoding="utf-8")))
    except OSError:
        return text
    for value in sorted((os.environ.get(n, "") for n in names), key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def _check_config(path: str) -> int:
    if _load(path) is None:
        return 2
    print(f"{path}: ok")
    return 0


def _run(args: argparse.Namespace) -> int:
    environ = dict(os.environ)
    path = args.config or environ.get("RELAYBOT_CONFIG")
    config: RelaybotConfig | None = None
    storage: Path
    if path:
        config = _load(path)
        if config is None:
            return 2
        storage = Path(config.storage.path)
        if not storage.is_absolute():
            storage = Path(path).resolve().parent / storage
    else:
        storage = data_dir(environ) / "relaybot.db"
    interactive = sys.stdout.isatty() and (
        config is None or all(c.kind == "console" for c in config.channels.values())
    )
    level_name = (args.log_level or ("warning" if interactive else "info")).upper()
    _setup_logging(config, args.log_format, getattr(logging, level_name, logging.INFO))
    try:
        return anyio.run(_serve, config, storage, environ, backend_options=_loop_options())
    except KeyboardInterrupt:
        return 0


def _setup_logging(config: RelaybotConfig | None, fmt: str, level: int) -> None:
    from orchestrator.logsetup import setup_logging
    from orchestrator.policy import OutboundPolicy

    policy = OutboundPolicy.from_config(config.policy if config else PolicyConfig())
    setup_logging(policy.redact, fmt="json" if fmt == "json" else "text", level=level)


def _loop_options() -> dict[str, bool]:
    """uvloop when installed (``relaybot[fast]``): a cheaper event loop per received read
    (bench/README.md); asyncio's own otherwise."""
    import importlib.util

    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


async def _serve(config: RelaybotConfig | None, storage: Path, environ: dict[str, str]) -> int:
    from orchestrator.daemon import serve

    if config is not None:
        return await serve(config, storage_path=storage)
    if environ.get("OPENAI_API_KEY"):
        return await serve(default_config(environ, demo_base_url=None), storage_path=storage)
    from orchestrator.demo_model import DemoModelServer

    async with anyio.create_task_group() as tg:
        demo = DemoModelServer()
        await demo.start(tg)
        print(DEMO_BANNER, file=sys.stderr)
        code = await serve(
            default_config(environ, demo_base_url=demo.base_url), storage_path=storage
        )
        tg.cancel_scope.cancel()
    return code


if __name__ == "__main__":
    sys.exit(main())
