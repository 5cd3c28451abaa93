"""Which command printed a text: the steps of a session (its tool calls) and their output, indexed
once per set of sources for the ``pairing`` rule.

An error is tied to the step that raised it: the call whose result printed it (or the harness
output that followed it). A summary that says "`bash -n` failed with "permission denied"" pairs a
step with an output; the sources pair them only if a run of that command printed it.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from projections.grounding.specifics import tokens

__all__ = ["Steps"]

# where a command starts inside a call's text: its opening quote or parenthesis, or after a shell
# operator (``cd x && mix test``)
_STARTS_COMMAND = re.compile(r"""(?:^|["'(\n]|&&\s?|;\s?|\|\s?)\Z""")
_TOOL = re.compile(r"\s*([A-Za-z_][\w.-]*)\(")


def _squash(text: str) -> str:
    return "".join(tokens(text))


class _Joined:
    """Texts joined into one string, each position mapped back to the unit it came from."""

    def __init__(self, parts: list[tuple[int, str]]):
        self.starts: list[int] = []
        self.units: list[int] = []
        chunks, pos = [], 0
        for unit, text in parts:
            self.starts.append(pos)
            self.units.append(unit)
            chunks.append(text)
            pos += len(text) + 1
        self.text = "\n".join(chunks)

    def unit_at(self, pos: int) -> int:
        return self.units[bisect_right(self.starts, pos) - 1]

    def units_with(self, needle: str, limit: int = 200) -> set[int]:
        out: set[int] = set()
        k = self.text.find(needle)
        while k >= 0 and len(out) < limit:
            out.add(self.unit_at(k))
            k = self.text.find(needle, k + 1)
        return out


class Steps:
    """The tool calls of a set of sources (their command text, by unit) and what the calls' results
    and the harness printed (squashed to words, by unit)."""

    def __init__(self, texts: tuple[str, ...], roles: list[str], calls: list[str], harness: list[bool], unit_of: list[int]):
        call_parts, out_parts = [], []
        self.tool: dict[int, str] = {}
        self.command: dict[int, str] = {}
        self.answered: set[int] = set()  # units whose call got a result (or harness output)
        for i, text in enumerate(texts):
            u = unit_of[i]
            if calls[i] and roles[i] != "tool":
                call_parts.append((u, " ".join(text.split())))
                m = _TOOL.match(text)
                self.tool.setdefault(u, m.group(1) if m else "")
                self.command.setdefault(u, text)
            elif roles[i] == "tool" or harness[i]:
                out_parts.append((u, text))
                if text.strip():
                    self.answered.add(u)
        self.calls = _Joined(call_parts)
        self._out_parts = out_parts
        self._outputs: _Joined | None = None
        self._run_by: dict[str, set[int]] = {}

    def runs_of(self, command: str) -> set[int]:
        """Units whose call runs ``command`` (it starts a command there, not merely names it)."""
        got = self._run_by.get(command)
        if got is None:
            flat = " ".join(command.split())
            got = set()
            text = self.calls.text
            k = text.find(flat) if len(flat) >= 4 and " " in flat else -1
            while k >= 0:
                after = text[k + len(flat) : k + len(flat) + 1]
                if _STARTS_COMMAND.search(text, max(0, k - 3), k) and not (after.isalnum() or after in "_.-" and after):
                    got.add(self.calls.unit_at(k))
                k = text.find(flat, k + 1)
            self._run_by[command] = got
        return got

    @property
    def outputs(self) -> _Joined:
        """What the results and the harness printed, squashed to words: built on first need (a
        summary line that credits a message to a command that ran)."""
        if self._outputs is None:
            self._outputs = _Joined([(u, _squash(text)) for u, text in self._out_parts])
        return self._outputs

    def mentioned_in_call(self, text: str, units: set[int]) -> bool:
        need = _squash(text)
        return any(need in _squash(self.command.get(u, "")) for u in units)

    def printed(self, text: str) -> set[int]:
        """Units whose result (or the harness text that followed) printed ``text``'s words."""
        need = _squash(text)
        return self.outputs.units_with(need) if len(need) >= 6 else set()
