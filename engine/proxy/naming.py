"""Which session a request belongs to: the ``X-Ctxledger-Session`` header, the proxy's ``--session``,
or one session per conversation named after its first user message and a hash of its opening.

Session names are stored in clear even in an encrypted store (a name is how a session is found), so
there a conversation's session gets a random name that says nothing of its content
(``proxy:7f3a09c2d1``); the conversation's key is kept inside the (encrypted) recorded request, and
read back when the proxy starts again (``ConversationIndex``)."""

from __future__ import annotations

import re
import secrets
from hashlib import blake2b
from typing import Any

from engine import validate
from engine.errors import InvalidInputError, LedgerError
from engine.importers.messages import Message, canonical_message, system_message

__all__ = ["SESSION_HEADER", "ConversationIndex", "conversation_key", "header_session", "opening", "random_name"]

SESSION_HEADER = "x-ctxledger-session"
_WORD = re.compile(r"[a-z0-9]+")
_SCAN = 8  # messages read from the start to find the system prompt and the first user message


def header_session(value: str | None) -> str | None:
    """The session named by the header, checked like any session name (``InvalidInputError``)."""
    if value is None:
        return None
    return validate.label(value.strip(), "the X-Ctxledger-Session header")


def opening(messages: list[Any], api: str, system: Any = None) -> tuple[Message | None, Message | None]:
    """The conversation's system prompt and first user message (reading only the first few messages)."""
    head = system_message(system) if system is not None else None
    first_user = None
    for i, raw in enumerate(messages[:_SCAN]):
        try:
            m = canonical_message(raw, api, i)
        except LedgerError:
            continue
        if m is None:
            continue
        if m.role == "system" and head is None:
            head = m
        elif m.role == "user" and any(p.kind == "message" for p in m.parts):
            first_user = m
            break
    return head, first_user


def conversation_key(head: Message | None, first_user: Message | None) -> tuple[str, str]:
    """(key, readable session name) of a conversation: ``proxy:<first words>:<hash>``."""
    digest = blake2b(digest_size=5)
    for m in (head, first_user):
        digest.update((m.hash if m is not None else "-").encode())
    key = digest.hexdigest()
    words: list[str] = []
    if first_user is not None:
        text = next(p.text for p in first_user.parts if p.kind == "message")
        words = _WORD.findall(text.lower())[:6]
    slug = "-".join(words)[:48].strip("-")
    name = f"proxy:{slug}:{key}" if slug else f"proxy:{key}"
    try:
        validate.label(name)
    except InvalidInputError:  # pragma: no cover - the slug is ASCII words, this is belt and braces
        name = f"proxy:{key}"
    return key, name


def random_name() -> str:
    """A conversation's session name that carries nothing of its content."""
    return f"proxy:{secrets.token_hex(5)}"


class ConversationIndex:
    """Conversation key -> session name, for stores whose names must not derive from content."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def load(self, ledger: object) -> None:
        """Read back the key each ``proxy:`` session recorded with its first request."""
        for info in ledger.sessions():  # type: ignore[attr-defined]
            if not info.name.startswith("proxy:") or info.position < 2:
                continue
            for ev in ledger.session(info.name).events(2, min(info.position, 12)):  # type: ignore[attr-defined]
                key = (getattr(ev, "meta", None) or {}).get("request", {}).get("conversation")
                if isinstance(key, str):
                    self.names.setdefault(key, info.name)
                    break

    def name_for(self, key: str) -> str:
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = random_name()
        return name
