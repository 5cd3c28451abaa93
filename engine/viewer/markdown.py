"""Markdown for the conversation view, rendered without ever letting session text become markup.

Models and users write Markdown; a chat view that shows ``**bold**`` and ``1.`` literally is hard to
read. This is a small subset (fenced code, headings, lists, quotes, paragraphs; inline code, bold,
italic; links shown as their text and address, never made clickable) built on ``esc_text``: every
line is escaped first (markup, quotes, bidi controls, ANSI sequences) and only then are the Markdown
markers, which escaping leaves alone, turned into a fixed set of attribute-free tags. No text can
produce an attribute, a URL the browser follows, or a tag outside that set.
"""

from __future__ import annotations

import re

from engine.viewer.escape import esc, esc_text

__all__ = ["render"]

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s{0,3}[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s{0,3}(\d{1,9})[.)]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}&gt;\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")

# inline, on escaped text: the markers survive html.escape unchanged
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")  # not __x__: identifiers (__init__, x.__dict__) are full of it
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")


def _inline(escaped: str) -> str:
    parts = _CODE.split(escaped)  # odd indexes are code: no further markup inside
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{part}</code>")
            continue
        part = _LINK.sub(lambda m: f'{m.group(1)} <span class="md-url">({m.group(2)})</span>', part)
        part = _BOLD.sub(lambda m: f"<b>{m.group(1)}</b>", part)
        part = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", part)
        out.append(part)
    return "".join(out)


def render(text: str) -> str:
    """``text`` as safe HTML (a ``<div class="md">`` of blocks)."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = ""
    quote: list[str] = []
    lines = text.split("\n")

    def flush() -> None:
        nonlocal list_tag
        if para:
            out.append("<p>" + "<br>".join(_inline(x) for x in para) + "</p>")
            para.clear()
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{_inline(x)}</li>" for x in items) + f"</{list_tag.split()[0]}>")
            items.clear()
            list_tag = ""
        if quote:
            out.append("<blockquote>" + "<br>".join(_inline(x) for x in quote) + "</blockquote>")
            quote.clear()

    i = 0
    while i < len(lines):
        raw = lines[i]
        fence = _FENCE.match(raw)
        if fence:
            flush()
            body = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(fence.group(1)):
                body.append(lines[i])
                i += 1
            out.append(f'<pre class="md-code">{esc_text(chr(10).join(body))}</pre>')
            i += 1
            continue
        line = esc_text(raw)
        if not line.strip():
            flush()
        elif m := _HEADING.match(line):
            flush()
            level = min(6, len(m.group(1)) + 3)
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
        elif _RULE.match(line):
            flush()
            out.append("<hr>")
        elif m := _BULLET.match(line):
            if list_tag != "ul":
                flush()
                list_tag = "ul"
            items.append(m.group(1))
        elif m := _NUMBERED.match(line):
            if not list_tag.startswith("ol"):
                flush()
                list_tag = f'ol start="{int(m.group(1))}"'
            items.append(m.group(2))
        elif m := _QUOTE.match(line):
            if para or items:
                flush()
            quote.append(m.group(1))
        elif items and raw.startswith(("  ", "\t")):
            items[-1] += "<br>" + line.strip()
        else:
            if items or quote:
                flush()
            para.append(line)
        i += 1
    flush()
    return '<div class="md">' + "".join(out) + "</div>" if out else f'<div class="md">{esc("")}</div>'
