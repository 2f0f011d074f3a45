"""Registries that other installed packages extend through entry points (the convention of
inspect_ai and lm-eval). A package declares its entries in its pyproject.toml, each under
its name in the registry:

    [project.entry-points."bgm_judge.providers"]
    length = "length_scorer:LengthScorer"

A registry reads its group at its first listing or look-up of a name it lacks; a plugin that
fails to load is one warning naming it and why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, TypeVar

from harness.core.errors import PluginWarning

V = TypeVar("V")
GROUP_PREFIX = "bgm_judge."


class Registry(MutableMapping[str, V]):
    """Entries by name. `adopt(name, loaded)` turns what a plugin's entry point names into
    an entry (None: loading it registered the entry itself, as a decorator does)."""

    def __init__(
        self,
        group: str,
        adopt: Callable[[str, Any], V | None],
        entries: Mapping[str, V] | None = None,
    ) -> None:
        self.group = GROUP_PREFIX + group
        self._adopt = adopt
        self._entries: dict[str, V] = dict(entries or {})
        self.plugins: dict[str, str] = {}  # name -> the distribution that added it
        self._loaded = False

    def __getitem__(self, name: str) -> V:
        if name not in self._entries:
            self.load_plugins()
        return self._entries[name]

    def __setitem__(self, name: str, entry: V) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self.plugins.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        self.load_plugins()
        return iter(self._entries)

    def __len__(self) -> int:
        self.load_plugins()
        return len(self._entries)

    def load_plugins(self) -> None:
        """Add the entries of every installed plugin of the group (once)."""
        if self._loaded:
            return
        self._loaded = True
        from importlib.metadata import entry_points

        for point in entry_points(group=self.group):
            package = point.dist.name if point.dist is not None else "?"
            try:
                entry = self._adopt(point.name, point.load())
                if entry is not None and self._entries.setdefault(point.name, entry) != entry:
                    raise LookupError(f"{point.name!r} is registered already")
                if point.name not in self._entries:
                    raise LookupError(f"loading it registered no {point.name!r}")
            except Exception as exc:  # a broken plugin must not stop the others
                warnings.warn(
                    f"plugin {package} ({self.group}: {point.name} = {point.value}) left out: "
                    f"{type(exc).__name__}: {exc}",
                    PluginWarning,
                    stacklevel=2,
                )
                continue
            self.plugins[point.name] = package

    def forget_plugins(self) -> None:
        """Drop the plugins' entries; the next look-up reads the installed plugins again."""
        for name in list(self.plugins):
            del self[name]
        self._loaded = False


def named(kind: type[V]) -> Callable[[str, Any], V | None]:
    """An `adopt` for plugins whose entry point names a `kind` object of the same `.name`,
    or a module or function whose import registered it (None)."""

    def adopt(name: str, loaded: Any) -> V | None:
        if not isinstance(loaded, kind):
            return None
        if loaded.name != name:  # type: ignore[attr-defined]
            raise ValueError(f"it names {loaded.name!r}, not {name!r}")  # type: ignore[attr-defined]
        return loaded

    return adopt
