"""The ``ctxledger`` command group and what every command shares: opening the store, JSON output,
errors turned into exit codes, a progress bar on terminals only."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click
import msgspec

from engine.escaping import printable
from engine.text_clip import clip
from engine.errors import (
    LedgerError,
    StorageError,
)
from engine.extras import EXTRA_OF_MODULE, MissingExtraError, extra_for

# Exit codes, like git/grep: 0 fine, 1 a check found a problem (drift, tampering), 2 usage or bad
# input (unknown session or span, position out of range), 3 the store could not be used.
EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3

_json = msgspec.json.Encoder(enc_hook=lambda o: str(o))


@click.group(name="ctxledger", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--db",
    "url",
    envvar="CTXLEDGER_URL",
    default="sqlite:///ctxledger.db",
    show_default=True,
    metavar="URL",
    help="Store: a file path or sqlite:///file.db, memory://, postgresql://user@host/db (or $CTXLEDGER_URL).",
)
@click.option(
    "--checker",
    "checker",
    envvar="CTXLEDGER_CHECKER",
    default="lexical",
    show_default=True,
    metavar="SPEC",
    help="Drift checker for audit, blame, report, fleet and the gate: lexical, llm:MODEL[@BASE_URL], nli:DIR (or $CTXLEDGER_CHECKER).",
)
@click.version_option(package_name="ctxledger")
@click.pass_context
def main(ctx: click.Context, url: str, checker: str) -> None:
    """ctxledger: an event-sourced ledger for LLM context windows.

    Every observation, prune, rewrite and re-derivation is an immutable event; the live buffer is a
    projection of the log, rebuildable and auditable at any position.

    \b
    Example:
      ctxledger demo                      # run the 40-cycle drift study
      ctxledger log demo-naive            # the log of a session
      ctxledger show demo-naive --at 120  # the buffer as it was after event 120
    """
    ctx.ensure_object(dict)
    ctx.obj["url"] = url
    ctx.obj["checker"] = checker


def shorten(text: str, width: int = 60) -> str:
    """One line of at most ``width`` characters, whitespace collapsed, control characters escaped."""
    return clip(printable(" ".join(text.split())), width)


def open_ledger(ctx: click.Context, *, short_names: bool = True):
    """The store of ``--db``. ``short_names``: a typed session name may be a unique prefix or suffix
    (``Ledger.resolve``); off for the commands that create sessions by name (import, watch, proxy,
    mcp, serve), where a new name must never land in an existing session it happens to prefix."""
    from engine.checkers.spec import checker_from_spec
    from engine.ledger import Ledger

    from engine.blame_index import install

    obj = ctx.find_root().obj
    ledger = install(Ledger.open(obj["url"], checker=checker_from_spec(obj.get("checker"))))
    ledger.short_names = short_names
    return ledger


def emit_json(obj: Any) -> None:
    click.echo(_json.encode(obj).decode())


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj, enc_hook=str)


def handle_errors(fn: Callable) -> Callable:
    """Turn ctxledger errors into a one-line message and a meaningful exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LedgerError as e:
            click.echo(f"ctxledger: error: {e.message}", err=True)
            sys.exit(EXIT_STORE if isinstance(e, StorageError) else EXIT_USAGE)
        except ModuleNotFoundError as e:
            # an optional extra's module, imported deep in a feature: the README's one line, not a traceback
            extra = _extra_of_command(e.name)
            if extra is None:
                raise
            what = click.get_current_context(silent=True)
            click.echo(f"ctxledger: error: {MissingExtraError(what.command_path if what else 'ctxledger', extra, e.name)}",
                       err=True)
            sys.exit(EXIT_USAGE)
        except BrokenPipeError:
            with contextlib.suppress(Exception):
                sys.stdout = open(os.devnull, "w")
            sys.exit(EXIT_OK)

    return wrapper


def _extra_of_command(module: str | None) -> str | None:
    """The extra a missing module belongs to; a command named after an extra (proxy, serve, ...)
    needs that one, whichever of its modules is missing."""
    extra = extra_for(module)
    if extra is None:
        return None
    ctx = click.get_current_context(silent=True)
    name = ctx.command.name if ctx is not None and ctx.command is not None else ""
    return name if name in set(EXTRA_OF_MODULE.values()) else extra


def interactive() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CTXLEDGER_NO_PROGRESS")


@contextlib.contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; silent when piped."""
    if not interactive():
        yield lambda n=1: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)


@functools.lru_cache(maxsize=1)
def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


@functools.lru_cache(maxsize=1)
def console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)
