"""The registry's shape: one :class:`Setting` per name, and the :class:`Registry` that reads,
checks and lists them (see the package docstring for the environment rule)."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from distcrawl.base.config.kinds import Kind
from distcrawl.base.identifiers import shown, unsafe_characters

__all__ = [
    "PREFIX",
    "Registry",
    "Scope",
    "Setting",
    "SettingError",
    "SettingRecord",
    "SettingsLike",
    "Unknown",
    "source",
]

#: the prefix of distcrawl's own setting names; an unknown name with it is reported
PREFIX = "DISTCRAWL_"

#: ``crawl``: must be the same on every node of a crawl (recorded in Redis, checked at start);
#: ``node``: each node may have its own
Scope = Literal["crawl", "node"]

#: Scrapy's priority names by number, to say where a bad value came from
_SOURCES = {
    0: "default",
    10: "command",
    15: "add-on",
    20: "the project settings",
    30: "the spider's custom_settings",
    40: "-s",
}
_PROJECT = 20


class SettingsLike(Protocol):
    """What the registry needs of a settings object (Scrapy's Settings, or a mapping)."""

    def get(self, name: str, default: Any = None) -> Any: ...


class SettingError(ValueError):
    """A setting's value cannot be used; the message names the setting and the reason."""


@dataclass(frozen=True)
class Setting:
    """One setting. ``default`` is the value when nothing sets it; with ``derive``, the
    default is computed from other settings (``derive`` gets a function reading any setting)
    and ``default`` is None. ``check`` returns what is wrong with a read value, or None."""

    name: str
    kind: Kind
    default: Any
    help: str
    scope: Scope = "node"
    public: bool = True
    #: distcrawl's default for one of Scrapy's own settings
    scrapy: bool = False
    derive: Callable[[Callable[[str], Any]], Any] | None = None
    #: how the derived default is computed, for the reference (with ``derive``)
    derived: str = ""
    check: Callable[[Any], str | None] | None = None

    def read(self, raw: Any) -> Any:
        """The value of *raw* (text or Python), checked; SettingError says what is wrong."""
        try:
            value = self.kind.read(raw)
        except ValueError as exc:
            reason = str(exc).lstrip(": ").strip()
            raise SettingError(f"{self.name}: {reason}") from None
        problem = self.check(value) if self.check is not None else None
        if problem:
            text = self.kind.show(value)
            # a value is shown as given, unless it would forge or hide lines of the log
            text = shown(text) if unsafe_characters(text) else text
            raise SettingError(f"{self.name} must be {problem}, not {text}")
        return value

    def show(self, value: Any) -> str:
        return self.kind.show(value)


class SettingRecord(NamedTuple):
    """One row of the settings reference."""

    name: str
    type: str
    default: str
    help: str
    scope: Scope
    env: str


class Unknown(NamedTuple):
    """A ``DISTCRAWL_*`` name that is no setting, where it was given, and the nearest
    setting name (None when nothing is near)."""

    name: str
    where: str
    nearest: str | None

    def message(self) -> str:
        hint = f"; did you mean {self.nearest}?" if self.nearest else ""
        return f"Unknown setting {self.name} ({self.where}) is ignored{hint}"


class Registry(Mapping[str, Setting]):
    """Every setting, each defined once."""

    def __init__(self, settings: Iterable[Setting], *, not_settings: Iterable[str] = ()) -> None:
        self._settings: dict[str, Setting] = {}
        for setting in settings:
            if setting.name in self._settings:
                raise ValueError(f"setting {setting.name} is defined twice")
            if setting.derive is not None and setting.default is not None:
                raise ValueError(f"setting {setting.name} has a default and a derivation")
            self._settings[setting.name] = setting
        #: environment variables of distcrawl's tooling that are no settings
        self.not_settings = frozenset(not_settings)

    def __getitem__(self, name: str) -> Setting:
        return self._settings[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settings)

    def __len__(self) -> int:
        return len(self._settings)

    # -- values -------------------------------------------------------------------------------

    def default(self, name: str) -> Any:
        """The default of *name* (a derived one: computed from the other defaults)."""
        return self.value({}, name)

    def value(self, settings: SettingsLike | Mapping[str, Any], name: str) -> Any:
        """The value of *name* in *settings*, read and checked by its kind; the default (or
        the derived default) where *settings* leaves it unset (None)."""
        setting = self._settings[name]
        raw = settings.get(name)
        if raw is not None:
            return setting.read(raw)
        if setting.derive is not None:
            return setting.derive(lambda other: self.value(settings, other))
        # a caller may change the list or dict it gets: never the registry's own
        return copy.deepcopy(setting.default)

    def shown(self, settings: SettingsLike | Mapping[str, Any], name: str) -> str:
        """The value of *name* as text (the form recorded in Redis and printed in messages)."""
        value = self.value(settings, name)
        return "" if value is None else self._settings[name].show(value)

    def problems(self, settings: Any, environ: Mapping[str, str] | None = None) -> list[str]:
        """What is wrong with the registered settings in *settings*: one line each, naming
        the setting, the reason and where the value came from (*environ*: the environment
        the project settings were read from)."""
        out = []
        for name, setting in self._settings.items():
            raw = settings.get(name)
            if raw is None:
                continue
            try:
                setting.read(raw)
            except SettingError as exc:
                out.append(f"{exc} (from {source(settings, name, environ)})")
        return out

    # -- the environment ------------------------------------------------------------------------

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The registered settings the environment supplies, as given (text, as ``-s`` gives
        it): each one's environment variable has its name."""
        return {name: environ[name] for name in self._settings if name in environ}

    def project_settings(self, environ: Mapping[str, str]) -> dict[str, Any]:
        """The values of a settings module made from the registry: each setting's default,
        replaced by its environment variable where one is set. Derived settings are left out
        (their default follows the settings they derive from)."""
        out = {
            name: setting.default
            for name, setting in self._settings.items()
            if setting.derive is None
        }
        out.update(self.environment(environ))
        return out

    def from_environment(self, environ: Mapping[str, str], name: str) -> Any:
        """The project value of *name*: its environment variable's, else its default."""
        return self.value(self.environment(environ), name)

    # -- names that are no settings ---------------------------------------------------------------

    def unknown(self, names: Iterable[str], where: str) -> list[Unknown]:
        """The ``DISTCRAWL_*`` names among *names* that are no setting, with the nearest
        registered name to each."""
        # the shared prefix would make every name look near every other
        known = {n[len(PREFIX) :]: n for n in self._settings if n.startswith(PREFIX)}
        out = []
        for name in sorted(set(names)):
            if not name.startswith(PREFIX) or name in self._settings:
                continue
            if where == "environment" and name in self.not_settings:
                continue
            near = difflib.get_close_matches(name[len(PREFIX) :], list(known), n=1, cutoff=0.6)
            out.append(Unknown(name, where, known[near[0]] if near else None))
        return out

    # -- the reference --------------------------------------------------------------------------

    def public(self) -> list[Setting]:
        return [s for s in self._settings.values() if s.public]

    def crawl_wide(self) -> list[Setting]:
        return [s for s in self._settings.values() if s.scope == "crawl"]

    def reference(self, *, hidden: bool = False, scrapy: bool | None = None) -> list[SettingRecord]:
        """The settings reference: one record per public setting (with *hidden*, every one),
        in the registry's order; *scrapy* True: only distcrawl's defaults for Scrapy's own
        settings, False: only distcrawl's settings."""
        return [
            SettingRecord(
                name=s.name,
                type=s.kind.name,
                default=s.derived if s.derive is not None else _show_default(s),
                help=s.help,
                scope=s.scope,
                env=s.name,
            )
            for s in self._settings.values()
            if (s.public or hidden) and (scrapy is None or s.scrapy == scrapy)
        ]


def _show_default(setting: Setting) -> str:
    if setting.default is None or setting.default == "":
        return "unset"
    return setting.show(setting.default)


def source(settings: Any, name: str, environ: Mapping[str, str] | None = None) -> str:
    """Where the value of *name* in *settings* came from, in words (Scrapy's priorities)."""
    priority = getattr(settings, "getpriority", None)
    number = priority(name) if priority is not None else None
    if number is None:
        return "settings"
    if (
        environ is not None
        and int(number) == _PROJECT
        and name in environ
        and str(settings.get(name)) == environ[name]
    ):
        return "the environment"
    return _SOURCES.get(int(number), f"priority {number}")
