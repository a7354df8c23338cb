"""The documentation's code examples run: every ```python block of README.md and docs/**/*.md.

Each page's blocks run in order as one script (they build on each other) in a fresh Python process: one test per
page, its id the page's path. The script keeps the page's line numbers (every other line is blank), so a traceback's
line is the page's line; a failure names the block and the line, with the end of stderr.

A block that must not run (minutes of bootstrapping keys, a multi-host launch) is marked by an HTML comment on the
line just above its fence, ``<!-- not-run: why -->``, which renders as nothing; the reason is required
(:func:`test_not_run_markers_say_why`). The heaviest pages (:data:`SLOW_PAGES`) run in ``make test-slow`` only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})\s*(?P<info>[^\n`]*)$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(?P<why>.*?)-->\s*$")
PAGE_TIMEOUT_S = 600
MIN_REASON_WORDS = 3


@dataclass(frozen=True)
class Block:
    """A fenced code block: ``first`` the 1-based page line of its first code line, ``lines`` its code (the fence's
    indentation removed), ``language`` the fence's first word, ``not_run`` the reason of a marker above it (or None
    without one)."""

    first: int
    lines: tuple[str, ...]
    language: str
    not_run: str | None

    @property
    def runs(self) -> bool:
        return self.language == "python" and self.not_run is None

    @property
    def last(self) -> int:
        return self.first + len(self.lines) - 1


def _dedent(line: str, indent: str) -> str:
    return line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, in order."""
    text = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(text):
        m = FENCE.match(text[i])
        if m is None:
            i += 1
            continue
        indent, ticks = m["indent"], m["ticks"]
        language = (m["info"].split() or [""])[0].lower()
        marker = NOT_RUN.match(text[i - 1]) if i > 0 else None
        j = i + 1
        while j < len(text) and not text[j].strip().startswith(ticks):
            j += 1
        code = tuple(_dedent(line, indent) for line in text[i + 1: j])
        out.append(Block(i + 2, code, language, marker["why"].strip() if marker else None))
        i = j + 1
    return out


def script(page: Path) -> tuple[str, list[Block]]:
    """The page's runnable blocks as one program whose line numbers are the page's, and those blocks."""
    n = len(page.read_text(encoding="utf-8").splitlines())
    lines = [""] * n
    runnable = [b for b in blocks(page) if b.runs]
    for b in runnable:
        lines[b.first - 1: b.last] = b.lines
    return "\n".join(lines) + "\n", runnable


def _page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _environment() -> dict[str, str]:
    """The caller's environment (JAX and crossfhe cache settings included), the repository on the path, one malloc
    arena; XLA's persistent cache on where the test suite keeps it (``CROSSFHE_JAX_CACHE``, else .jax_cache, as
    tests/conftest.py), unless that variable turns it off."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["MALLOC_ARENA_MAX"] = "1"
    cache = os.environ.get("CROSSFHE_JAX_CACHE") or str(ROOT / ".jax_cache")
    if cache.lower() not in ("0", "off", "false", "no"):  # crossfhe.runtime's opt-out
        env.setdefault("JAX_COMPILATION_CACHE_DIR", cache)
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
    return env


def _failure(page: Path, runnable: list[Block], program: Path, stderr: str) -> str:
    """Where the page's program failed (the block and its line, from the innermost traceback frame in it)."""
    lines = [int(m) for m in re.findall(rf'File "{re.escape(str(program))}", line (\d+)', stderr)]
    where = "before its first block ran"
    if lines:
        line = lines[-1]
        block = next((b for b in runnable if b.first <= line <= b.last), None)
        where = (f"in the block at line {block.first}, line {line}" if block else f"at line {line}")
    return f"{_page_id(page)}: a ```python block failed {where} of the page:\n{stderr[-4000:]}"


SLOW_PAGES = {
    # page: what the default run still runs of it. Each took 55-214 s in a cold 2-core CI run (2026-11-29), together
    # a sixth of the default run; they run in `make test-slow`.
    "docs/tutorials/encrypted-ml.md": "tests/test_helr.py, tests/test_cnn.py, tests/test_tfhe_ml.py (214 s)",
    "docs/tutorials/scheme-switching.md": "tests/test_switch.py (100 s)",
    "docs/architecture.md": "tests/test_front_end.py, tests/test_one_program.py (73 s)",
    "docs/tutorials/bfv-matvec.md": "tests/test_hmvp.py, tests/test_diagonal.py (72 s)",
    "docs/tutorials/integers.md": "tests/tfhe/test_integer.py (55 s)",
    # these two took 199 and 69 s in a cold 2-core CI run (2026-12-03)
    "docs/tutorials/encrypted-integers.md": "tests/test_api_integer.py, tests/tfhe/test_integer_ops.py",
    "docs/tutorials/serving.md": "tests/test_serve.py, tests/test_bench_serve.py",
    # compiles at N 2^14 (the smallest secure preset with the model's depth); the default run compiles the same
    # model at an insecure N 2^11
    "docs/tutorials/your-own-model.md": "tests/test_ml_onnx.py",
}


def _page_param(page: Path):
    slow = _page_id(page) in SLOW_PAGES
    return pytest.param(page, id=_page_id(page), marks=[pytest.mark.slow] if slow else [])


def test_slow_pages_exist():
    """Every page SLOW_PAGES names is a page with examples (a renamed page would silently leave the slow run)."""
    runnable = {_page_id(p) for p in PAGES if script(p)[1]}
    assert set(SLOW_PAGES) <= runnable, sorted(set(SLOW_PAGES) - runnable)


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES if script(p)[1]])
def test_page_examples_run(page, tmp_path):
    source, runnable = script(page)
    program = tmp_path / "page" / page.name  # a traceback and the circuits' source lines then name the page
    program.parent.mkdir()
    program.write_text(source, encoding="utf-8")
    env = _environment()
    # not the user's cache directory; the executable store is the test run's (CROSSFHE_JAX_CACHE, tests/conftest.py)
    env.setdefault("CROSSFHE_CACHE_DIR", str(tmp_path / "crossfhe-cache"))
    work = tmp_path / "work"
    work.mkdir()
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, str(program)], cwd=work, env=env, capture_output=True, text=True,
                         timeout=PAGE_TIMEOUT_S)
    seconds = time.perf_counter() - t0
    print(f"{_page_id(page)}: {len(runnable)} blocks in {seconds:.1f} s")
    if res.returncode != 0:
        pytest.fail(_failure(page, runnable, program, res.stderr), pytrace=False)


def test_not_run_markers_say_why():
    """Each not-run marker stands just above a ```python fence and says why in a few words; a marker anywhere
    else is a mistake (it would silently not apply)."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8").splitlines()
        marked = {b.first - 3 for b in blocks(page) if b.not_run is not None}  # 0-based line of the marker
        for i, line in enumerate(text):
            m = NOT_RUN.match(line)
            if m is None:
                continue
            where = f"{_page_id(page)}:{i + 1}"
            assert i in marked, f"{where}: a not-run marker must be the line just above a ```python fence"
            assert len(m["why"].split()) >= MIN_REASON_WORDS, f"{where}: a not-run marker must say why it does not run"
        for b in blocks(page):
            if b.not_run is not None:
                assert b.language == "python", f"{_page_id(page)}:{b.first - 2}: not-run marks ```python blocks only"


def test_pages_have_examples():
    """The tutorials and the README show code that runs."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorials").glob("*.md"))]:
        assert any(b.runs for b in blocks(page)), f"{_page_id(page)} has no ```python block that runs"


def test_readme_links_resolve():
    """README.md's relative links point at files of the repository (they are read on GitHub, outside MkDocs, which
    checks the docs pages' own links with --strict)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = ROOT / target.split("#")[0]
        assert path.exists(), f"README.md links to {target}, which is not in the repository"
