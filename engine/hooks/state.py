"""Where the hooks keep their own small state: which ledger session they recorded for which working
directory (``ctxledger mcp --follow`` reads it), the store they wrote to, and a lock per session so
two hooks racing on one session take turns.

The directory is ``$CTXLEDGER_HOOKS_STATE``, else ``$XDG_STATE_HOME/ctxledger``, else
``~/.local/state/ctxledger``. ``hooks.json`` maps ``agent -> cwd -> {session, db, at}``; it is
replaced atomically (written beside, then renamed) under its own lock, mode 0600 (a PostgreSQL
URL may hold a password).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["state_dir", "default_db_url", "ensure_folder", "remember", "recorded", "locked", "cached", "cache"]

STATE_FILE = "hooks.json"


def state_dir() -> Path:
    explicit = os.environ.get("CTXLEDGER_HOOKS_STATE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "ctxledger"


def default_db_url() -> str:
    """The store hooks write to when neither ``--db`` nor ``$CTXLEDGER_URL`` names one: one file for
    every project, so ``mcp --follow`` finds a session whatever directory it was recorded from."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return f"sqlite:///{Path(base) / 'ctxledger' / 'hooks.db'}"


def ensure_folder(url: str) -> None:
    """A SQLite store's folder exists (the default store lives in the user's data directory)."""
    if url.startswith("sqlite:///"):
        folder = os.path.dirname(os.path.expanduser(url[len("sqlite:///"):]))
        if folder:
            os.makedirs(folder, exist_ok=True)


@contextlib.contextmanager
def locked(key: str, *, timeout: float = 20.0) -> Iterator[None]:
    """An exclusive lock named ``key`` across processes (``fcntl.flock`` on a file in the state
    directory); where there is no ``fcntl`` (Windows), no lock: the store's own optimistic
    concurrency still refuses a doubled write."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    folder = state_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another ctxledger hook has held {key!r} for {timeout:.0f} s") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remember(agent: str, cwd: str, session: str, db: str) -> None:
    """Record that the hooks of ``agent`` wrote ``session`` (in store ``db``) for directory ``cwd``."""
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STATE_FILE
    with locked("state-file"):
        data = _read(path)
        per_agent = data.setdefault(agent, {})
        if not isinstance(per_agent, dict):
            per_agent = data[agent] = {}
        per_agent[os.path.normpath(cwd)] = {"session": session, "db": db, "at": time.time()}
        _replace(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


def recorded(agent: str, cwd: str) -> dict[str, Any] | None:
    """What the hooks of ``agent`` last recorded for ``cwd`` or the nearest directory above it
    (``{"session", "db", "at", "cwd"}``), or None."""
    per_agent = _read(state_dir() / STATE_FILE).get(agent)
    if not isinstance(per_agent, dict):
        return None
    here = Path(os.path.normpath(os.path.abspath(cwd)))
    for folder in (here, *here.parents):
        entry = per_agent.get(str(folder))
        if isinstance(entry, dict) and isinstance(entry.get("session"), str) and isinstance(entry.get("db"), str):
            return {**entry, "cwd": str(folder)}
    return None


def _cache_path(key: str) -> Path:
    return state_dir() / "cache" / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")


def cached(key: str, version: int) -> bytes | None:
    """What ``cache(key, version, data)`` kept, if it was kept for this ``version``."""
    try:
        raw = _cache_path(key).read_bytes()
    except OSError:
        return None
    head, _, data = raw.partition(b"\n")
    return data if head == str(version).encode() else None


def cache(key: str, version: int, data: bytes) -> None:
    """Keep ``data`` for ``key`` at ``version`` (one entry per key: the newest replaces it)."""
    path = _cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, str(version).encode() + b"\n" + data)


def _replace(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, or what it held before: written beside it (mode 0600, a name no
    other process uses), then renamed over it. Not ``tempfile``: importing it (with shutil, random,
    bz2 and lzma) costs every hook run ~5 ms."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
