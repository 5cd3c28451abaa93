"""The HTML report in a real browser: Debian's headless Chromium loads the page with the network
disabled, runs its script without errors, draws the charts (the page says so in ``data-rendered``
and the dumped DOM holds the SVG), and takes a screenshot whose pixels show the chart's colors.

Skipped, with the reason, when Chromium is not installed — except in CI (``$CI`` set), where a
missing browser is a failure: ``.ci/run`` installs it."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.cli import main

pytestmark = pytest.mark.browser

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and os.access(p, os.X_OK)), "")
OBSERVED_RGB = (0x4C, 0x78, 0xA8)  # --obs in engine/report.py, drawn at 85% opacity on white
DERIVED_RGB = (0xF5, 0x85, 0x18)  # --der


@pytest.fixture(scope="module")
def chromium() -> str:
    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI is set but /usr/bin/chromium is missing: .ci/run must install Debian's chromium")
        pytest.skip("headless Chromium is not installed (apt-get install chromium); the report's browser test needs it")
    return CHROMIUM


def _run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def _console(stderr: str) -> list[str]:
    """What the page printed to its console (errors, uncaught exceptions) as Chromium logs it."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into rows of RGB bytes."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    i = 0
    for _ in range(height):
        ftype, line = raw[i], bytearray(raw[i + 1 : i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = line
        rows.append(bytes(line) if bpp == 3 else bytes(v for k, v in enumerate(line) if k % 4 != 3))
    return width, height, rows


def _count_near(rows: list[bytes], rgb: tuple[int, int, int], alpha: float, tol: int = 14) -> int:
    """Pixels close to ``rgb`` drawn at opacity ``alpha`` over white."""
    target = [round(alpha * v + (1 - alpha) * 255) for v in rgb]
    n = 0
    for row in rows:
        for k in range(0, len(row), 3):
            if abs(row[k] - target[0]) <= tol and abs(row[k + 1] - target[1]) <= tol and abs(row[k + 2] - target[2]) <= tol:
                n += 1
    return n


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """A report of the naive and guarded demo sessions, written by the CLI."""
    d = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{d / 'demo.db'}"
    runner = CliRunner()
    r = runner.invoke(main, ["--db", url, "demo", "--cycles", "12", "--invent", "0.6", "--no-audit"])
    assert r.exit_code == 0, r.output
    out = d / "report.html"
    r = runner.invoke(main, ["--db", url, "report", "demo-naive", "demo-guarded", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_report_loads_without_errors_and_draws_its_charts(chromium, report, tmp_path):
    r = _run(chromium, tmp_path / "profile", "--dump-dom", report.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert _console(r.stderr) == [], "the page logged to its console:\n" + "\n".join(_console(r.stderr))
    dom = r.stdout
    root = re.search(r"<html[^>]*>", dom).group(0)
    assert 'data-rendered="ok"' in root, root
    assert 'data-charts="2"' in root, root
    assert dom.count("<svg") == 2
    assert dom.count('class="area-observed"') == 2 and dom.count('class="area-derived"') == 2
    points = [int(n) for n in re.findall(r'data-points="(\d+)"', dom)]
    assert len(points) == 2 and all(n > 100 for n in points)
    assert "marker marker-Rewritten" in dom  # both runs rewrote
    assert "marker marker-RewriteRefused" in dom  # the gate refused at least one guarded rewrite
    assert 'id="js-error" hidden' in dom
    assert "demo-naive" in dom and "generation-exceeded" in dom


def test_report_screenshot_shows_the_chart(chromium, report, tmp_path):
    shot = tmp_path / "report.png"
    r = _run(chromium, tmp_path / "profile", "--window-size=1400,1000", f"--screenshot={shot}", report.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert _console(r.stderr) == []
    data = shot.read_bytes()
    assert len(data) > 10_000
    width, height, rows = _png_pixels(data)
    assert (width, height) == (1400, 1000)
    observed = _count_near(rows, OBSERVED_RGB, 0.85)
    derived = _count_near(rows, DERIVED_RGB, 0.6)
    assert observed > 20_000, f"only {observed} pixels of the observed-tokens area"
    assert derived > 200, f"only {derived} pixels of the derived-tokens area"
