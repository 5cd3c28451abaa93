"""Finding an importer: by format name, or by asking each one whether it recognises a path.

Importers are registered as entry points in the group ``ctxledger.importers`` (pyproject.toml), so
another package can add a format; the built-in ones are also known without the package metadata.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

from engine.errors import ImportFormatError, InvalidInputError

__all__ = ["GROUP", "BUILTIN", "importer", "builtin", "formats", "detect_format", "import_path"]

GROUP = "ctxledger.importers"
BUILTIN = {
    "claude-code": "engine.importers.claude_code:IMPORTER",
    "codex": "engine.importers.codex:IMPORTER",
    "openhands": "engine.importers.openhands:IMPORTER",
    "messages": "engine.importers.message_log:IMPORTER",
}


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@functools.lru_cache(maxsize=1)
def _registered() -> dict[str, str]:
    """The entry points (read once per process: importing importlib.metadata and scanning the
    installed packages costs ~20-30 ms)."""
    from importlib.metadata import entry_points

    found = {}
    for ep in entry_points(group=GROUP):
        found[ep.name] = ep.value
    return found


def formats() -> list[str]:
    """Every format that can be imported (built-in and registered), available ones only."""
    return list(_available())


@functools.lru_cache(maxsize=1)
def _available() -> tuple[str, ...]:
    names = {**BUILTIN, **_registered()}
    out = []
    for name, target in names.items():
        try:
            _load(target)
        except ImportError:
            continue
        out.append(name)
    return tuple(sorted(out))


def importer(format: str) -> Any:
    """The importer object for a format name."""
    targets = {**BUILTIN, **_registered()}
    if format not in targets:
        raise InvalidInputError(
            f"unknown import format {format!r}; known: ctxledger, {', '.join(formats())}"
        )
    try:
        return _load(targets[format])
    except ImportError as e:
        raise InvalidInputError(f"the {format} importer cannot be loaded: {e}") from None


def builtin(format: str) -> Any:
    """The importer ctxledger itself ships for a format, whatever another package registers under
    its name: what ctxledger's own agent hooks read their agent's transcripts with (without the
    scan of installed packages that ``importer`` needs)."""
    if format not in BUILTIN:
        raise InvalidInputError(f"no built-in importer for {format!r}; built in: {', '.join(BUILTIN)}")
    return _load(BUILTIN[format])


def detect_format(path: Path) -> str:
    """The format whose importer recognises ``path`` (a file or a directory)."""
    for name in formats():
        try:
            found = _load({**BUILTIN, **_registered()}[name]).detect(path)
        except (OSError, ValueError, RecursionError):  # unreadable or hostile bytes: not recognised
            found = False
        if found:
            return name
    raise ImportFormatError(
        f"{path}: not a transcript format ctxledger knows ({', '.join(formats())}); name one with --format"
    )


def import_path(ledger: Any, path: Any, format: str | None = None, name: str | None = None,
                skip_bad: bool = False):
    """Import a transcript (a file or a directory) into ``ledger``; returns an ``ImportResult``."""
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"{path}: no such file or directory")
    fmt = format or detect_format(path)
    return importer(fmt).run(ledger, path, name=name, skip_bad=skip_bad)
