"""The inspector page in a real browser: headless Chromium renders it, and the test checks
what a person would see (the band, the legend, the versions table, the timeline colours in
the screenshot), that no script from the ledger ran, and that the console stayed clean.

Chromium is Debian's `chromium` package (`.ci/run` installs it). Without it the test fails
under CI (`CI` set); only a local run without `CI` may skip it.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from urllib.parse import urljoin

import pytest
from click.testing import CliRunner

from html_ledgers import CONVERSATION, build_purged_db, build_states_db
from ledgerfold import CompactionPolicy, Compactor, ExtractiveSummarizer, SQLiteStore
from ledgerfold._cli import cli

TIMEOUT = 120


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "chromium is not installed (apt-get install -y chromium; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message + "; set CI=1 to make this a failure")
    return path


def _run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # root in containers
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=2000",  # let any script that would run, run
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def _console_errors(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    return [
        line
        for line in lines
        if "CONSOLE" in line
        or "Uncaught" in line
        or "Refused to" in line
        or ":ERROR:CONSOLE" in line
    ]


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB(A) rows of an 8-bit RGB/RGBA PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1) : (y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for x in range(stride):
            left = row[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                row[x] = (row[x] + left) & 0xFF
            elif kind == 2:
                row[x] = (row[x] + up) & 0xFF
            elif kind == 3:
                row[x] = (row[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[x] = (row[x] + pred) & 0xFF
        rows.append(bytes(row))
        previous = row
    return width, height, [bytes(r) for r in rows] if channels == 3 else _rgb(rows)


def _rgb(rows: list[bytes]) -> list[bytes]:
    return [bytes(b for i, b in enumerate(row) if i % 4 != 3) for row in rows]


def _has_colour(rows: list[bytes], rgb: tuple[int, int, int], tolerance: int = 6) -> bool:
    for row in rows:
        for x in range(0, len(row), 3):
            if all(abs(row[x + i] - rgb[i]) <= tolerance for i in range(3)):
                return True
    return False


def test_inspector_page_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    db = tmp_path / "states.db"
    build_states_db(db)
    page = tmp_path / "inspect.html"
    result = CliRunner().invoke(
        cli, ["inspect", str(db), CONVERSATION, "--html", str(page)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    url = page.resolve().as_uri()

    dumped = _run_chromium(chromium, tmp_path / "profile-dom", "--dump-dom", url)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    # What a person sees: the title, the band, the legend, the versions table, the context.
    assert "<title>ledgerfold · c&lt;b&gt;1&lt;/b&gt;</title>" in dom
    assert 'id="band"' in dom and 'id="legend"' in dom and 'id="versions"' in dom
    assert 'id="context"' in dom and 'class="msg summary"' in dom
    # Each cited summary line links to its source turns, shown below the summary (§16.3).
    assert 'class="cite" href="#source-0"' in dom and 'id="source-0"' in dom
    # No script from a body ran: the title is unchanged, no element was made from a body.
    assert "pwned" not in dom.split("</title>")[0]
    assert "<script" not in dom and "<img" not in dom
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert _console_errors(dumped.stderr) == []

    shot = tmp_path / "inspect.png"
    shown = _run_chromium(
        chromium, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1280,900", url
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert _console_errors(shown.stderr) == []
    width, height, rows = _png_pixels(shot)
    assert (width, height) == (1280, 900)
    # The timeline is on screen: compacted (green), raw (blue), protected (amber) marks and
    # the band's fill.
    for colour in ((0x10, 0xB9, 0x81), (0x3B, 0x82, 0xF6), (0xF5, 0x9E, 0x0B), (0xD1, 0xFA, 0xE5)):
        assert _has_colour(rows, colour), colour


def test_report_links_to_inspector_pages_in_headless_chromium(
    chromium: str, tmp_path: Path
) -> None:
    """The report as the browser renders it: the totals and the attention table on screen,
    and a conversation's link, followed, opens that conversation's inspector page."""
    db = tmp_path / "states.db"
    build_states_db(db)
    build_purged_db(db)
    report = tmp_path / "report.html"
    result = CliRunner().invoke(
        cli, ["report", str(db), "--html", str(report)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    dumped = _run_chromium(chromium, tmp_path / "profile-report", "--dump-dom", report.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    assert 'id="totals"' in dom and 'id="attention"' in dom and "<script" not in dom
    assert _console_errors(dumped.stderr) == []
    # The link of the conversation that needs attention, as the browser resolves it.
    match = re.search(r'<a href="([^"]+)">c&lt;b&gt;1&lt;/b&gt;</a>', dom)
    assert match is not None
    target = urljoin(report.as_uri(), html.unescape(match.group(1)))
    assert target.startswith((tmp_path / "report.pages").as_uri() + "/")
    followed = _run_chromium(chromium, tmp_path / "profile-follow", "--dump-dom", target)
    assert followed.returncode == 0, followed.stderr[-2000:]
    page = followed.stdout
    assert "<title>ledgerfold · c&lt;b&gt;1&lt;/b&gt;</title>" in page
    assert 'id="band"' in page and 'id="versions"' in page and 'id="context"' in page
    assert _console_errors(followed.stderr) == []
    # And back: the inspector page's link leads to the report.
    back = re.search(r'<a class="back" id="back" href="([^"]+)">', page)
    assert back is not None and urljoin(target, back.group(1)) == report.as_uri()

    shot = tmp_path / "report.png"
    shown = _run_chromium(
        chromium,
        tmp_path / "profile-report-shot",
        f"--screenshot={shot}",
        "--window-size=1280,900",
        report.as_uri(),
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    if os.environ.get("LEDGERFOLD_KEEP_SCREENSHOT"):  # for a person to look at
        shutil.copy(shot, os.environ["LEDGERFOLD_KEEP_SCREENSHOT"])
    width, height, rows = _png_pixels(shot)
    assert (width, height) == (1280, 900)
    # On screen: the attention table's red edge, the failed badge, the mini bars' colours.
    for colour in ((0xEF, 0x44, 0x44), (0xFE, 0xF3, 0xC7), (0x10, 0xB9, 0x81)):
        assert _has_colour(rows, colour), colour


def test_a_boundary_at_the_end_keeps_its_label_on_the_timeline(
    chromium: str, tmp_path: Path
) -> None:
    """A history boundary at the last turn (everything purged): its label reads leftwards from
    the line, so no text spills past the timeline's box to the right edge of the page."""
    db = tmp_path / "purged.db"
    with SQLiteStore(db) as store:
        store.append_many("e", [{"role": "user", "body": f"turn {n}"} for n in range(8)])
        store.purge_through("e", 8, "gone", force=True)
    page = tmp_path / "end.html"
    result = CliRunner().invoke(
        cli, ["inspect", str(db), "e", "--html", str(page)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    shot = tmp_path / "end.png"
    shown = _run_chromium(
        chromium,
        tmp_path / "profile-end",
        f"--screenshot={shot}",
        "--window-size=1280,600",
        page.as_uri(),
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    width, _, rows = _png_pixels(shot)
    # The page's content is at most 1,144 px wide, centred: nothing is drawn right of it.
    margin = [row[3 * (width - 50) :] for row in rows]
    assert not _has_colour(margin, (0x11, 0x18, 0x27), tolerance=60)


def test_the_failed_summaries_card_is_highlighted_while_a_failure_is_unanswered(
    chromium: str, tmp_path: Path
) -> None:
    """The report's failed summaries' card is highlighted (pink, as the other trouble cards)
    while a summary failed after its conversation's last accepted one; once a summary is
    accepted after it, the failure is history and the card is plain."""
    db = tmp_path / "failed.db"
    with SQLiteStore(db) as store:
        store.append_many("f", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
        store.record_failure(store.start_plan("f", 4, "v1").plan_id, "model timed out")
    for answered in (False, True):
        if answered:
            with SQLiteStore(db) as store:
                policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=4)
                Compactor(store, policy, ExtractiveSummarizer()).compact("f", force=True)
        report = tmp_path / f"report-{answered}.html"
        result = CliRunner().invoke(
            cli, ["report", str(db), "--html", str(report)], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        dom = _run_chromium(chromium, tmp_path / f"dom-{answered}", "--dump-dom", report.as_uri())
        assert dom.returncode == 0, dom.stderr[-2000:]
        cards = re.findall(r'<div class="stat( bad)?" data-stat="([^"]+)">', dom.stdout)
        assert "summaries.failed" in [key for _, key in cards]
        assert [key for bad, key in cards if bad] == ([] if answered else ["summaries.failed"])
        shot = tmp_path / f"report-{answered}.png"
        shown = _run_chromium(
            chromium,
            tmp_path / f"shot-{answered}",
            f"--screenshot={shot}",
            "--window-size=1280,900",
            report.as_uri(),
        )
        assert shown.returncode == 0, shown.stderr[-2000:]
        if os.environ.get("LEDGERFOLD_KEEP_SCREENSHOT"):  # for a person to look at
            shutil.copy(shot, f"{os.environ['LEDGERFOLD_KEEP_SCREENSHOT']}.{answered}.png")
        # On screen: a card's area (about 130 x 60 px) of `.stat.bad`'s background, which
        # nothing else on the page has (a few edge pixels come close).
        pink = _count_colour(_png_pixels(shot)[2], (0xFE, 0xF2, 0xF2))
        assert (pink < 1_000) if answered else (pink > 4_000), pink


def _count_colour(rows: list[bytes], rgb: tuple[int, int, int], tolerance: int = 6) -> int:
    return sum(
        all(abs(row[x + i] - rgb[i]) <= tolerance for i in range(3))
        for row in rows
        for x in range(0, len(row), 3)
    )


def test_a_healthy_report_shows_no_red(chromium: str, tmp_path: Path) -> None:
    """When no conversation needs attention the page says so without the attention table's
    red edge (the "No conversation needs attention." line carried it, as an alarm)."""
    db = tmp_path / "healthy.db"
    with SQLiteStore(db) as store:
        store.append_many("ok", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
        Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=4)).compact("ok")
    report = tmp_path / "healthy.html"
    result = CliRunner().invoke(cli, ["report", str(db), "--html", str(report)])
    assert result.exit_code == 0, result.output
    assert "No conversation needs attention." in report.read_text(encoding="utf-8")
    shot = tmp_path / "healthy.png"
    shown = _run_chromium(
        chromium,
        tmp_path / "profile-healthy",
        f"--screenshot={shot}",
        "--window-size=1280,900",
        report.as_uri(),
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    rows = _png_pixels(shot)[2]
    assert _has_colour(rows, (0x10, 0xB9, 0x81))  # the page is drawn: a mini bar's green
    assert not _has_colour(rows, (0xEF, 0x44, 0x44))
