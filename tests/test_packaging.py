"""Packaging: license, typing marker, one version, the command line's --version and bench, the changelog, and the
dependency floors that .ci/min-versions tests."""

import fnmatch
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from crossfhe._version import __version__
from crossfhe.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _floor(requirement: str) -> Version:
    """The version of the single ``>=`` bound of a requirement string."""
    (spec,) = [s for s in Requirement(requirement).specifier if s.operator == ">="]
    return Version(spec.version)


def _dependency(name: str) -> str:
    (req,) = [r for r in PROJECT["dependencies"] if Requirement(r).name == name]
    return req


def test_license_is_apache_2():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text and "http://www.apache.org/licenses/" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in PROJECT.get("classifiers", ()))  # PEP 639: the SPDX field only


def test_build_backend_supports_spdx_license():
    (setuptools,) = [r for r in PYPROJECT["build-system"]["requires"] if Requirement(r).name == "setuptools"]
    assert _floor(setuptools) >= Version("77")


def _package_data_patterns(package: str) -> list[str]:
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    return [*data.get(package, ()), *data.get("*", ())]


def test_py_typed_shipped():
    assert (ROOT / "crossfhe" / "py.typed").is_file()
    assert "py.typed" in _package_data_patterns("crossfhe")
    assert "Typing :: Typed" in PROJECT["classifiers"]


def test_native_sources_shipped():
    """Every non-Python file the package reads at run time (the native kernels' sources) is package data."""
    files = [p for p in (ROOT / "crossfhe").rglob("*") if p.is_file() and p.suffix in (".c", ".cc", ".h")]
    assert files
    for path in files:
        package = ".".join(path.parent.relative_to(ROOT).parts)
        assert any(fnmatch.fnmatch(path.name, pat) for pat in _package_data_patterns(package)), path


def test_version_single_sourced():
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "crossfhe._version.__version__"
    assert Version(__version__) == Version(importlib.metadata.version("crossfhe"))


def test_project_urls():
    urls = PROJECT["urls"]
    assert {"Homepage", "Repository", "Documentation", "Changelog", "Issues"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())
    assert urls["Repository"] == cli.REPOSITORY


def test_changelog_has_current_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert headings[0] == "Unreleased"
    assert __version__ in headings
    assert re.search(rf"^\[{re.escape(__version__)}\]: https://", text, flags=re.M)


def test_version_option(capsys):
    import jax
    import numpy as np

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code in (0, None)
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"crossfhe {__version__} (jax {jax.__version__}, jaxlib ")
    assert f"numpy {np.__version__}" in out and f"Python {sys.version_info.major}.{sys.version_info.minor}." in out
    assert f"backend {jax.default_backend()})" in out


@pytest.mark.parametrize("argv", [["bench", "--help"], ["bench", "-h"], ["bench"]], ids=" ".join)
def test_bench_lists_every_suite(argv, capsys):
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    for suite in cli.BENCH_SUITES:
        (line,) = [ln for ln in lines if ln.split()[:1] == [suite]]
        assert len(line.split()) > 3  # the suite and what it measures
    assert any("--quick" in ln for ln in lines)


def test_bench_options_without_a_suite_refused(capsys):
    assert cli.main(["bench", "--quick"]) == 2
    assert "name a suite" in capsys.readouterr().err


def test_suite_list_matches_benchmarks():
    assert set(cli.SUITE_SUMMARIES) == set(cli.BENCH_SUITES)
    shipped = {p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert shipped == set(cli.BENCH_SUITES)


def test_bench_without_benchmarks_says_how_to_get_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cli.BENCHMARKS_ENV, str(tmp_path))
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "ntt", "--quick"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "git clone https://github.com/crossfhe/crossfhe" in err and "make bench" in err and "bench_ntt.py" in err
    assert cli.main(["bench"]) == 0  # the list still works, and says where the benchmarks are
    assert "git clone" in capsys.readouterr().out


def test_plot_args():
    png, tmp = Path("results/ntt.png"), Path("/tmp/x.json")
    assert cli._plot_args(["--quick"], default_png=png, temp_json=tmp) == (["--quick"], None, None)
    assert cli._plot_args(["--quick", "--plot"], default_png=png, temp_json=tmp) == (
        ["--quick", "--json", str(tmp)], tmp, png)
    assert cli._plot_args(["--plot", "a.png", "--quick"], default_png=png, temp_json=tmp) == (
        ["--quick", "--json", str(tmp)], tmp, Path("a.png"))
    assert cli._plot_args(["--plot=b.png"], default_png=png, temp_json=tmp) == (
        ["--json", str(tmp)], tmp, Path("b.png"))
    assert cli._plot_args(["--json", "r.json", "--plot", "--reps", "3"], default_png=png, temp_json=tmp) == (
        ["--json", "r.json", "--reps", "3"], Path("r.json"), png)
    assert cli._plot_args(["--plot", "--json=r.json"], default_png=png, temp_json=tmp) == (
        ["--json=r.json"], Path("r.json"), png)


FAKE_SUITE = """
import json, sys
from pathlib import Path
args = sys.argv[1:]
Path(sys.argv[0]).with_name("suite_argv.json").write_text(json.dumps(args))
if "--json" in args:
    Path(args[args.index("--json") + 1]).write_text("[]")
sys.exit({status})
"""

FAKE_PLOT = """
import json, sys
from pathlib import Path
args = sys.argv[1:]
assert Path(args[args.index("--json") + 1]).read_text() == "[]"
Path(sys.argv[0]).with_name("plot_argv.json").write_text(json.dumps(args))
"""


def _fake_benchmarks(tmp_path, monkeypatch, status) -> Path:
    (tmp_path / "bench_ntt.py").write_text(FAKE_SUITE.format(status=status))
    (tmp_path / "plot.py").write_text(FAKE_PLOT)
    monkeypatch.setenv(cli.BENCHMARKS_ENV, str(tmp_path))
    return tmp_path


def _read(path: Path):
    import json

    return json.loads(path.read_text()) if path.exists() else None


@pytest.mark.parametrize("status", ["None", "0"])
def test_bench_plot_runs_after_the_suite(tmp_path, monkeypatch, status):
    where = _fake_benchmarks(tmp_path, monkeypatch, status)
    assert cli.main(["bench", "ntt", "--quick", "--plot"]) == 0
    suite_argv, plot_argv = _read(where / "suite_argv.json"), _read(where / "plot_argv.json")
    assert suite_argv[0] == "--quick" and suite_argv[1] == "--json" and "--plot" not in suite_argv
    assert plot_argv == ["--suite", "ntt", "--json", suite_argv[2], "--out", str(where / "results" / "ntt.png")]
    assert not Path(suite_argv[2]).exists()  # the temporary records are removed


def test_bench_plot_keeps_the_users_json(tmp_path, monkeypatch):
    where = _fake_benchmarks(tmp_path, monkeypatch, 0)
    records, png = tmp_path / "mine.json", tmp_path / "pic.png"
    assert cli.main(["bench", "ntt", "--json", str(records), "--plot", str(png)]) == 0
    assert _read(where / "suite_argv.json") == ["--json", str(records)]
    assert _read(where / "plot_argv.json") == ["--suite", "ntt", "--json", str(records), "--out", str(png)]
    assert records.exists()


def test_bench_failed_suite_skips_the_plot(tmp_path, monkeypatch):
    where = _fake_benchmarks(tmp_path, monkeypatch, 3)
    assert cli.main(["bench", "ntt", "--plot"]) == 3
    assert _read(where / "suite_argv.json") is not None and _read(where / "plot_argv.json") is None


def test_bench_help_goes_to_the_suite(tmp_path, monkeypatch):
    where = _fake_benchmarks(tmp_path, monkeypatch, 0)
    saved = list(sys.argv)
    assert cli.main(["bench", "ntt", "--help"]) == 0
    assert _read(where / "suite_argv.json") == ["--help"]
    assert sys.argv == saved


def _min_versions_script() -> dict[str, str]:
    text = (ROOT / ".ci" / "min-versions").read_text()
    return dict(re.findall(r"^([A-Z_]+)=([0-9][0-9.]*)\b", text, flags=re.M))


def test_floors_agree_with_min_versions_ci():
    pins = _min_versions_script()
    python, jax, numpy = Version(pins["MIN_PYTHON"]), Version(pins["JAX"]), Version(pins["NUMPY"])
    requires = SpecifierSet(PROJECT["requires-python"])
    assert f"{python}.0" in requires and f"{python.major}.{python.minor - 1}.99" not in requires
    assert _floor(_dependency("jax")) == jax
    assert _floor(_dependency("numpy")) == numpy
    assert _floor(_dependency("flatbuffers")) == Version(pins["FLATBUFFERS"])
    assert _floor(_dependency("tqdm")) == Version(pins["TQDM"])
    (gpu,) = PROJECT["optional-dependencies"]["gpu"]
    assert _floor(gpu) == jax
    classifiers = {c.rsplit(" :: ", 1)[-1] for c in PROJECT["classifiers"] if c.startswith("Programming Language")}
    assert f"{python.major}.{python.minor}" in classifiers
    assert f"{python.major}.{python.minor - 1}" not in classifiers
    assert Path(ROOT / ".ci" / "min-versions").stat().st_mode & 0o111
