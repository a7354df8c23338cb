"""benchmarks/gpu_session.sh and its record (issue 46): what a CPU can check of the device calls before one is made."""

import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))

import device_record  # noqa: E402


def test_every_stage_the_script_names_has_its_branch():
    """The script parses (bash -n), each stage its header lists has exactly one well-formed branch, and no branch
    line holds more than its test (an ``elif ...; thenelif ...`` once made the eager stage unreachable: bash reads
    the glued word as a command, so the condition fails and the script still parses)."""
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    listed = re.findall(r"^#   bash benchmarks/gpu_session\.sh (\w+)", text, flags=re.M)
    branches = [line for line in text.splitlines() if re.match(r"(el)?if \[ \"\$STAGE\"", line)]
    assert all(re.fullmatch(r"(el)?if \[ \"\$STAGE\" = \w+ \]; then", b) for b in branches), branches
    named = [re.search(r"= (\w+) \]", b).group(1) for b in branches]
    assert len(named) == len(set(named))
    assert set(listed) - {"bench"} == set(named) and "bench" in listed  # bench: the else branch


def test_device_record_gathers_the_call_into_one_dated_file(tmp_path):
    """device_record.py: the environment lines, each step's status and seconds, every JSON (an unreadable one said
    so), the summary, in one file named by stage and UTC time; a missing directory exits 2."""
    (tmp_path / "env.txt").write_text("name, memory.total [MiB]\nNVIDIA H200, 143771 MiB\njax 0.11.2\n")
    (tmp_path / "steps.txt").write_text("tfhe: exit 0 in 201 s\ntfhe_ntt: exit 124 in 90 s\n")
    (tmp_path / "tfhe.json").write_text(json.dumps([{"preset": "P4", "latency_ms": 1.5}]))
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "summary.txt").write_text("a table\n")
    when = datetime.datetime(2026, 12, 1, 9, 30, tzinfo=datetime.UTC)
    path = device_record.record(tmp_path, "tfhe", now=when)
    assert path.name == "device-run_tfhe_2026-12-01T0930Z.json"
    rec = json.loads(path.read_text())
    assert rec["utc"] == "2026-12-01T09:30:00Z" and rec["environment"][1] == "NVIDIA H200, 143771 MiB"
    assert rec["steps"] == [{"step": "tfhe", "exit": 0, "seconds": 201},
                            {"step": "tfhe_ntt", "exit": 124, "seconds": 90}]
    assert rec["results"]["tfhe"] == [{"preset": "P4", "latency_ms": 1.5}]
    assert "unreadable" in rec["results"]["broken"] and rec["summary"] == ["a table"]
    assert "device-run_tfhe_2026-12-01T0930Z" not in device_record.record(tmp_path, "tfhe", now=when).read_text()
    assert device_record.main([str(tmp_path / "missing"), "tfhe"]) == 2
