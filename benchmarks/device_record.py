"""One dated JSON record of a ``gpu_session.sh`` call, for ``benchmarks/device-runs/`` (issue 46).

    python benchmarks/device_record.py OUT STAGE

Reads what the call left in ``OUT``: ``env.txt`` (``nvidia-smi``'s device name, memory, driver and clocks, JAX's
versions and devices, the host's CPU count), ``steps.txt`` (each step's exit status and seconds), every ``*.json``
the steps wrote, and ``summary.txt`` where the stage writes one. Writes ``OUT/device-run_<STAGE>_<UTC time>.json``
(one file, so that it comes back with the call's other files) and prints its name. The session that made the call
copies it under ``benchmarks/device-runs/`` and commits it. Exits 2 when ``OUT`` is not a directory.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from pathlib import Path


def _steps(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        m = re.match(r"(\S+): exit (\d+) in (\d+) s$", line.strip())
        if m:
            out.append({"step": m.group(1), "exit": int(m.group(2)), "seconds": int(m.group(3))})
    return out


def record(out: Path, stage: str, now: datetime.datetime | None = None) -> Path:
    """Write the record of the call whose files are in ``out``; returns its path."""
    now = now or datetime.datetime.now(datetime.UTC)
    env = (out / "env.txt").read_text(errors="replace") if (out / "env.txt").exists() else ""
    steps = (out / "steps.txt").read_text(errors="replace") if (out / "steps.txt").exists() else ""
    results = {}
    for f in sorted(out.glob("*.json")):
        if f.name.startswith("device-run_"):
            continue
        try:
            results[f.stem] = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            results[f.stem] = {"unreadable": f"{type(e).__name__}: {e}"}
    rec = {
        "stage": stage,
        "utc": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environment": env.splitlines(),
        "steps": _steps(steps),
        "results": results,
    }
    if (out / "summary.txt").exists():
        rec["summary"] = (out / "summary.txt").read_text(errors="replace").splitlines()
    path = out / f"device-run_{stage}_{now.strftime('%Y-%m-%dT%H%MZ')}.json"
    path.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    return path


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not Path(args[0]).is_dir():
        print("usage: python benchmarks/device_record.py OUT STAGE (OUT: the call's output directory)", file=sys.stderr)
        return 2
    print(record(Path(args[0]), args[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
