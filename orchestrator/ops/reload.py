"""SIGHUP: reading the config file again (architecture §7 "Reload").

Theory of operation
-------------------
:func:`read_for_reload` loads and checks the file exactly as ``relaybot run`` does
(:data:`orchestrator.ops.config_checks.RUN_CHECKS`); a file that does not validate gives
one log line saying why, and the running config stays. :func:`plan_reload` compares the
running config with the new one (pure; pydantic models compare field by field, secrets by value):

* channels added, removed, or whose section changed: those are stopped and/or started; the
  others keep running, with their running answers;
* providers added, removed or changed, and the chain of ``agent.providers``: when either
  changed, the next rounds are served from a new chain in which only changed providers are new
  objects; a round already running finishes on the chain it began with;
* ``storage``, ``server``, ``policy`` and the rest of ``agent`` are read at start only: a change
  there is named in one log line ("takes effect after a restart") and otherwise ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from config.errors import ConfigError
from config.loader import load_config
from config.models import RelaybotConfig

__all__ = ["ReloadPlan", "plan_reload", "read_for_reload"]


@dataclass(frozen=True, slots=True)
class ReloadPlan:
    """What a reload changes; names are config keys."""

    channels_added: tuple[str, ...] = ()
    channels_removed: tuple[str, ...] = ()
    channels_changed: tuple[str, ...] = ()
    providers_added: tuple[str, ...] = ()
    providers_removed: tuple[str, ...] = ()
    providers_changed: tuple[str, ...] = ()
    chain_changed: bool = False
    """``agent.providers`` or a provider in it changed: the next rounds use a new chain."""
    after_restart: tuple[str, ...] = field(default=())
    """Sections whose change takes effect only after a restart."""

    @property
    def empty(self) -> bool:
        return not (
            self.channels_added
            or self.channels_removed
            or self.channels_changed
            or self.providers_added
            or self.providers_removed
            or self.providers_changed
            or self.chain_changed
            or self.after_restart
        )

    def summary(self) -> str:
        """One line: what changed, e.g. ``channels added: tg2; providers changed: main``."""
        parts: list[str] = []
        for label, names in (
            ("channels added", self.channels_added),
            ("channels removed", self.channels_removed),
            ("channels restarted", self.channels_changed),
            ("providers added", self.providers_added),
            ("providers removed", self.providers_removed),
            ("providers changed", self.providers_changed),
        ):
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        if self.chain_changed and not (self.providers_changed or self.providers_added):
            parts.append("provider chain changed")
        if self.after_restart:
            parts.append(f"after a restart only: {', '.join(self.after_restart)}")
        return "; ".join(parts) or "nothing changed"


def plan_reload(old: RelaybotConfig, new: RelaybotConfig) -> ReloadPlan:
    """What moving from ``old`` to ``new`` changes (module docstring)."""
    channels_added = tuple(n for n in new.channels if n not in old.channels)
    channels_removed = tuple(n for n in old.channels if n not in new.channels)
    channels_changed = tuple(
        n for n in new.channels if n in old.channels and new.channels[n] != old.channels[n]
    )
    providers_added = tuple(n for n in new.providers if n not in old.providers)
    providers_removed = tuple(n for n in old.providers if n not in new.providers)
    providers_changed = tuple(
        n for n in new.providers if n in old.providers and new.providers[n] != old.providers[n]
    )
    chain_changed = old.agent.providers != new.agent.providers or any(
        n in providers_changed for n in new.agent.providers
    )
    after_restart: list[str] = []
    for section in ("storage", "server", "policy"):
        if getattr(old, section) != getattr(new, section):
            after_restart.append(section)
    old_agent = old.agent.model_copy(update={"providers": new.agent.providers})
    if old_agent != new.agent:
        after_restart.append("agent")
    return ReloadPlan(
        channels_added=channels_added,
        channels_removed=channels_removed,
        channels_changed=channels_changed,
        providers_added=providers_added,
        providers_removed=providers_removed,
        providers_changed=providers_changed,
        chain_changed=chain_changed,
        after_restart=tuple(after_restart),
    )


def read_for_reload(path: str | Path) -> RelaybotConfig | str:
    """The config in ``path`` checked as ``run`` checks it, or one line saying why it cannot be
    used (the first problem and how many there are; never a value from the file)."""
    from orchestrator.ops.config_checks import RUN_CHECKS

    try:
        return load_config(path, checks=RUN_CHECKS)
    except ConfigError as exc:
        errors = [issue for issue in exc.errors if not getattr(issue, "warning", False)]
        first = str(errors[0] if errors else exc.errors[0])
        more = len(errors) - 1
        suffix = f" (and {more} more problem{'s' if more != 1 else ''})" if more > 0 else ""
        return f"{first}{suffix}"
    except OSError as exc:
        return f"{path}: cannot read: {exc.strerror or exc}"
