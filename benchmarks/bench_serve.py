"""Serving (issue: the HTTP server): a load test of ``crossfhe serve`` on localhost, N concurrent clients x M
requests on a TFHE model and a CKKS model, batched against one request at a time.

    python benchmarks/bench_serve.py [--clients 8] [--requests 8] [--models tfhe,ckks] [--key-sets 2]
                                     [--window-ms 5] [--max-items 64] [--workers 1] [--kill-restart]
                                     [--timeout 900] [--json PATH] [--quick]

The models (exported with :meth:`crossfhe.Circuit.export`, served from a temporary directory):

- ``tfhe``: ``relu(2x + y - 4)`` as one table lookup (``(x * 2 + y).apply(...)``, one programmable bootstrap) on two
  ``TFHEInt(2)`` inputs, at ``crossfhe.tfhe.presets.P4_128`` (p-fail 2^-128.9); checked exactly against NumPy's
  ``maximum(2x + y - 4, 0)``.
- ``ckks``: ``0.5 x^2 + x`` on a ``CKKSVector(64)``, at ``crossfhe.ckks.presets.N13_L3`` (N 8192, scale 2^26: the
  preset ``compile`` picks for this depth-2 circuit); inputs uniform in [-1, 1]; a result is right when every slot is
  within 1e-3 of NumPy's ``0.5 x^2 + x``. Why 1e-3: at scale 2^26 one multiplication and a rescale leave errors near
  2^-13 (about 1.4e-4 measured on these inputs), so 1e-3 (about 2^-10) keeps three bits of margin, while a value
  computed under another key, from another request or in the wrong slot is off by O(1).

``--quick``: 4 clients x 3 requests on the insecure test sets ``crossfhe.testing.INSECURE_TFHE_P4`` and
``INSECURE_CKKS_N10`` (tests only).

Clients and keys. The clients are threads of this process, each with its own :class:`crossfhe.client.Client`. The
clients share key sets in ``--key-sets`` groups (client i uses set i mod K): the server batches requests of one model
under one key set only, and each client sends its requests one after another, so with a key set per client no two
requests could ever share a launch; K >= 2 still has requests under different key sets queued together (taking turns
in the server's round robin), and K sets bound the key generation (a P4_128 server key is about 130 MB). Per model,
each set is made once (``RemoteModel.keygen``, on this machine; the secret key never leaves it) and, per server,
uploaded once (``upload_keys``) by its group's first client; every request is encrypted before the load starts
(encryption is the client's work, not the server's), so the timed part of a request is exactly what
``RemoteModel.run`` does: pack the ciphertexts, POST ``/v1/models/{name}/run`` (with the client's retries), unpack
the reply. Results are decrypted after the load and each is checked against the plain model.

Phases, per model, each on a fresh server (``python -m crossfhe serve`` as a subprocess on a free port of
127.0.0.1, its own key store in the temporary directory): ``batched`` (``--max-items`` as given) and ``one``
(``--max-items 1``: one request per launch, the baseline), the same clients, requests and ciphertexts. Each phase:

1. start the server and wait for ``/v1/health``; upload the key sets (``upload_s``);
2. warm-up, untimed: one request of b items for each batch size b (a power of two) a launch of this phase may run
   at, up to the largest group's size (the server compiles one program per power-of-two batch size on first use; JAX's
   persistent compilation cache may make it a load; with ``--workers`` > 1 the request is repeated until every worker
   has answered it, as each compiles its own) -- its duration is ``compile_s`` -- then one round of the same
   concurrent load (every client one request at once; ``warmup_s`` is the whole warm-up);
3. the timed load: every client sends its M requests, each after the previous one's answer. Latency: per request,
   as above (p50, p99, min, max over all requests). Throughput: answered requests (and items: one per request here;
   a CKKS item is one 64-slot vector) / the wall time from the start of the load to its last answer;
4. requests per launch: from ``/metrics`` (``crossfhe_batch_requests``), the difference between scrapes after the
   warm-up and after the load: mean = sum / count, max = the smallest histogram bucket holding every launch (so a
   power of two, an upper bound); with ``--workers`` > 1 the scrapes are repeated until every worker has answered
   (each counts its own);
5. the server's memory: the resident set (``VmRSS`` of ``/proc/PID/status``) summed over the server process and its
   descendants (``/proc/PID/task/*/children``), sampled every 0.5 s from its start to its stop: peak and the series;
6. stop the server (SIGTERM, then SIGKILL after 30 s).

``gain`` = the batched phase's requests/s / the one-at-a-time phase's, on this machine's CPUs. A request that raised
(no answer after the client's retries, or a refusal) is ``lost``; one whose decryption differs from the plain model
is ``wrong``. ``--kill-restart`` adds a third TFHE phase, ``kill_restart``: the batched phase again, but when half the
load's requests have been answered the server (every process of it) is killed with SIGKILL and started again on the
same port and key store; the clients keep going on their retries and do not upload their keys again, so every
request after the restart must be answered from the keys the store kept on disk (``restart_s``: kill to healthy;
``keys_on_disk`` after the restart). It is a phase of its own so that the gain compares undisturbed phases.

Bounded: ``--clients`` x ``--requests`` per phase and ``--timeout`` seconds in all (past it, the servers are killed,
the requests in flight end within the clients' retries -- about 13 s at the default 6 -- and count as lost, the phases
left are skipped, and the exit status is 1). Prints one JSON object on stdout (``records``: one per model and
phase, in the fields of benchmarks' records, with ``median_ms`` = p50; the CPU's ``lscpu`` model name; the load
average before and after each phase; the memory series) and a table on stderr; exits with status 1 if any result
was wrong or lost. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crossfhe.cli.benchutil import cpu_name, load_average

MODELS = ("tfhe", "ckks")
CKKS_BOUND = 1e-3
CKKS_LENGTH = 64
SAMPLE_S = 0.5


def _relu4(v: int) -> int:
    return max(v - 4, 0)


def _tfhe_fn(x, y):
    return (x * 2 + y).apply(_relu4)


def _ckks_fn(x):
    return x * x * 0.5 + x


# --------------------------------------------------------------------------------------------------
# Machine facts
# --------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (parents first)."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        if p not in seen:
            seen.append(p)
            todo += _children(p)
    return seen


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler(threading.Thread):
    """Every ``SAMPLE_S`` seconds, the resident MiB of the server whose pid is ``self.pid`` (and its descendants)."""

    def __init__(self):
        super().__init__(daemon=True, name="rss-sampler")
        self.pid: int | None = None
        self.t0 = time.perf_counter()
        self.series: list[tuple[float, float]] = []
        self._halt = threading.Event()

    def sample(self) -> None:
        pid = self.pid
        if pid is not None:
            kib = sum(_rss_kib(p) for p in _tree(pid))
            if kib:
                self.series.append((round(time.perf_counter() - self.t0, 2), round(kib / 1024, 1)))

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(SAMPLE_S)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------

LIVE: list[ServerProc] = []  # for the watchdog


class ServerProc:
    """``python -m crossfhe serve`` as a subprocess (its output in ``log``)."""

    def __init__(self, model_file: Path, store: Path, port: int, *, workers: int, window_ms: float, max_items: int,
                 log: Path):
        self.cmd = [sys.executable, "-m", "crossfhe", "serve", str(model_file), "--host", "127.0.0.1", "--port",
                    str(port), "--store", str(store), "--workers", str(workers), "--window-ms", str(window_ms),
                    "--max-items", str(max_items)]
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self, sampler: RssSampler | None = None, wait_s: float = 180.0) -> float:
        """Start it and wait until healthy; the seconds that took."""
        t0 = time.perf_counter()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        LIVE.append(self)
        if sampler is not None:
            sampler.pid = self.proc.pid
        from crossfhe.client import Client

        probe = Client(self.url, retries=0, timeout=5)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with status {self.proc.returncode}:\n{self.tail()}")
            try:
                probe.health()
                return time.perf_counter() - t0
            except (ConnectionError, OSError, ValueError):
                pass
            if time.perf_counter() - t0 > wait_s:
                raise RuntimeError(f"the server was not healthy after {wait_s:.0f} s:\n{self.tail()}")
            time.sleep(0.1)

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def kill9(self) -> None:
        """SIGKILL to the server and every process under it (uvicorn's workers)."""
        if self.proc is None:
            return
        for pid in reversed(_tree(self.proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        if self in LIVE:
            LIVE.remove(self)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            if self in LIVE:
                LIVE.remove(self)
            return
        pids = _tree(self.proc.pid)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill9()
        for pid in pids[1:]:  # a worker its supervisor left behind
            if _rss_kib(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self in LIVE:
            LIVE.remove(self)


_METRIC = re.compile(r"^(crossfhe_batch_requests|crossfhe_batch_items|crossfhe_launch_seconds)_(bucket|sum|count)"
                     r"\{([^}]*)\}\s+(\S+)$")
_KEYS = re.compile(r'^crossfhe_keys\{[^}]*where="disk"[^}]*\}\s+(\S+)$')


def _parse_metrics(text: str) -> tuple[str, dict, int]:
    """(worker, {name: {"sum", "count", "buckets": {le: n}}}, keys on disk) of one /metrics page."""
    worker, hists, disk = "?", {}, 0
    for line in text.splitlines():
        m = _METRIC.match(line)
        if m:
            name, part, labels, value = m.groups()
            lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            worker = lab.get("worker", worker)
            h = hists.setdefault(name, {"sum": 0.0, "count": 0, "buckets": {}})
            if part == "bucket":
                h["buckets"][lab["le"]] = int(float(value))
            elif part == "sum":
                h["sum"] = float(value)
            else:
                h["count"] = int(float(value))
            continue
        k = _KEYS.match(line)
        if k:
            disk = int(float(k.group(1)))
    return worker, hists, disk


def scrape(url: str, workers: int) -> tuple[dict, int]:
    """({worker: histograms}, keys on disk) from /metrics, asked until every worker answered (at most 30 tries each)."""
    from crossfhe.client import Client

    cl = Client(url, retries=2, timeout=30)
    seen, disk = {}, 0
    for _ in range(30 * workers):
        _, _, body = cl.request("GET", "/metrics")
        w, hists, disk = _parse_metrics(body.decode())
        seen[w] = hists
        if len(seen) >= workers:
            break
    return seen, disk


def _minus(after: dict, before: dict) -> dict:
    """Per worker, the histograms of ``after`` less those of ``before`` (a worker only in ``after``: all of it)."""
    out = {}
    for w, hists in after.items():
        base = before.get(w, {})
        out[w] = {}
        for name, h in hists.items():
            b = base.get(name, {"sum": 0.0, "count": 0, "buckets": {}})
            out[w][name] = {"sum": h["sum"] - b["sum"], "count": h["count"] - b["count"],
                            "buckets": {le: n - b["buckets"].get(le, 0) for le, n in h["buckets"].items()}}
    return out


def _launch_stats(per_worker: dict, name: str = "crossfhe_batch_requests") -> tuple[int, float | None, float | None]:
    """(launches, mean per launch, max per launch as the smallest bucket bound holding every launch)."""
    total, count, buckets = 0.0, 0, {}
    for hists in per_worker.values():
        h = hists.get(name)
        if h is None:
            continue
        total += h["sum"]
        count += h["count"]
        for le, n in h["buckets"].items():
            buckets[le] = buckets.get(le, 0) + n
    if not count:
        return 0, None, None
    bound = min((float(le) for le, n in buckets.items() if le != "+Inf" and n >= count), default=float("inf"))
    return count, total / count, bound


# --------------------------------------------------------------------------------------------------
# Models, keys and requests
# --------------------------------------------------------------------------------------------------


@dataclass
class Bench:
    """One model: its exported file, its plain function, and (once made) its key sets and requests."""

    kind: str
    name: str
    path: Path
    params: str
    check: object  # (got, want) -> bool
    keys: list = field(default_factory=list)  # CircuitKeys per key set
    decryptors: list = field(default_factory=list)  # a RemoteModel per key set, holding it
    requests: list = field(default_factory=list)  # per client: [(encrypted inputs, want)], the first the warm-up's
    sizes: dict = field(default_factory=dict)  # batch size -> (encrypted inputs under set 0, want)
    keygen_s: float = 0.0
    encrypt_s: float = 0.0


def _tfhe_check(got, want) -> bool:
    return np.array_equal(np.asarray(got).astype(np.int64), np.asarray(want).astype(np.int64))


def _ckks_check(got, want) -> bool:
    got = np.real(np.asarray(got))
    return got.shape == np.shape(want) and bool(np.all(np.abs(got - want) <= CKKS_BOUND))


def export_models(kinds: list[str], quick: bool, root: Path) -> dict[str, Bench]:
    """Compile and export each model (its exporter's keys made here and dropped: exporting needs argument shapes)."""
    import crossfhe
    from crossfhe import testing
    from crossfhe.api.specs import CKKSVector, TFHEInt
    from crossfhe.ckks import presets as cp
    from crossfhe.tfhe import presets as tp

    out = {}
    for kind in kinds:
        if kind == "tfhe":
            params = testing.INSECURE_TFHE_P4 if quick else tp.P4_128
            c = crossfhe.compile(_tfhe_fn, TFHEInt(2), TFHEInt(2), params=params, name="bench_tfhe", cache=False)
            label, check = params.name, _tfhe_check
        else:
            params = testing.INSECURE_CKKS_N10 if quick else cp.N13_L3
            c = crossfhe.compile(_ckks_fn, CKKSVector(CKKS_LENGTH), params=params, name="bench_ckks", cache=False)
            label = "INSECURE_CKKS_N10" if quick else "N13_L3"
            check = _ckks_check
        c.keygen()
        path = root / f"{c.name}.cfhe"
        c.export(path)
        out[kind] = Bench(kind, c.name, path, label, check)
        print(f"# exported {kind} ({label}) to {path}", file=sys.stderr, flush=True)
    return out


def _plain(kind: str, values):
    if kind == "tfhe":
        x, y = values
        return np.maximum(2 * np.asarray(x) + np.asarray(y) - 4, 0)
    (x,) = values
    return 0.5 * x * x + x


def _values(kind: str, rng, batch: tuple = ()):
    if kind == "tfhe":
        return np.asarray(rng.integers(0, 4, batch)), np.asarray(rng.integers(0, 4, batch))
    return (rng.uniform(-1.0, 1.0, (*batch, CKKS_LENGTH)),)


def prepare(bench: Bench, url: str, clients: int, requests: int, key_sets: int, max_group: int) -> None:
    """The clients' keys (one RemoteModel per set) and every request, encrypted (made once per model)."""
    import jax

    from crossfhe.client import Client

    t0 = time.perf_counter()
    for _ in range(key_sets):
        rm = Client(url).model(bench.name)
        rm.keygen()
        jax.block_until_ready(jax.tree.leaves(rm.keys.public))  # key generation dispatches asynchronously
        bench.keys.append(rm.keys)
        bench.decryptors.append(rm)
    bench.keygen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(clients):
        rng = np.random.default_rng(1000 + i)
        rm = bench.decryptors[i % key_sets]
        reqs = []
        for _ in range(requests + 1):
            vals = _values(bench.kind, rng)
            reqs.append((rm.encrypt(*vals), _plain(bench.kind, vals)))
        bench.requests.append(reqs)
    rng = np.random.default_rng(7)
    b = 1
    while b <= _bucket(max_group):
        vals = _values(bench.kind, rng, (b,))
        bench.sizes[b] = (bench.decryptors[0].encrypt(*vals), _plain(bench.kind, vals))
        b *= 2
    bench.encrypt_s = time.perf_counter() - t0


def _bucket(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# --------------------------------------------------------------------------------------------------
# One phase
# --------------------------------------------------------------------------------------------------


def _run_request(client, name: str, enc) -> tuple[list, str]:
    """What RemoteModel.run does (pack, POST .../run, unpack), keeping the answering worker."""
    from crossfhe.api.circuit import Encrypted
    from crossfhe.io.bundle import pack_bundle, unpack_bundle

    body = pack_bundle([x.serialize() for x in enc])
    _, headers, data = client.request("POST", f"/v1/models/{urllib.parse.quote(name, safe='')}/run", body)
    outs = [Encrypted.load(b) for b in unpack_bundle(data, what=f"{name}'s reply")]
    return outs, headers.get("x-crossfhe-worker", "?")


@dataclass
class Outcome:
    client: int
    index: int
    latency_s: float | None = None
    outs: list | None = None
    worker: str = "?"
    error: str | None = None
    t_done: float = 0.0


def _load_round(bench: Bench, url: str, picks: list[list[int]], retries: int) -> tuple[list[Outcome], float]:
    """Every client (a thread) sends its requests ``picks[i]`` one after another; (outcomes, wall seconds)."""
    from crossfhe.client import Client

    n = len(picks)
    barrier = threading.Barrier(n + 1)
    results: list[list[Outcome]] = [[] for _ in range(n)]

    def client_main(i: int) -> None:
        cl = Client(url, retries=retries)
        barrier.wait()
        for j in picks[i]:
            o = Outcome(i, j)
            t = time.perf_counter()
            try:
                o.outs, o.worker = _run_request(cl, bench.name, bench.requests[i][j][0])
                o.latency_s = time.perf_counter() - t
            except Exception as e:  # noqa: BLE001 - a lost request, counted and reported
                o.error = f"{type(e).__name__}: {e}"[:300]
            o.t_done = time.perf_counter()
            results[i].append(o)
            PROGRESS.tick()

    threads = [threading.Thread(target=client_main, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    ends = [o.t_done for r in results for o in r]
    return [o for r in results for o in r], (max(ends) if ends else time.perf_counter()) - t0


class _Progress:
    def __init__(self):
        self.lock = threading.Lock()
        self.done = 0

    def reset(self) -> None:
        with self.lock:
            self.done = 0

    def tick(self) -> None:
        with self.lock:
            self.done += 1


PROGRESS = _Progress()


def _check(bench: Bench, o: Outcome, key_sets: int, want) -> bool | None:
    """True/False: decrypted and right/wrong; None: no answer."""
    if o.outs is None:
        return None
    try:
        got = bench.decryptors[o.client % key_sets].decrypt(o.outs) if o.client >= 0 else \
            bench.decryptors[0].decrypt(o.outs)
    except Exception as e:  # noqa: BLE001 - an answer that does not decrypt is wrong
        o.error = f"decrypt: {type(e).__name__}: {e}"[:300]
        return False
    return bench.check(got, want)


def run_phase(bench: Bench, mode: str, args, root: Path, deadline: float) -> dict:
    from crossfhe.client import Client

    max_items = 1 if mode == "one" else args.max_items
    key_sets = args.key_sets
    group = -(-args.clients // key_sets)  # the largest group: requests of one key set that can be waiting together
    tag = f"{bench.kind}-{mode}"
    store = root / f"store-{tag}"
    port = _free_port()
    sampler = RssSampler()
    server = ServerProc(bench.path, store, port, workers=args.workers, window_ms=args.window_ms,
                        max_items=max_items, log=root / f"server-{tag}.log")
    rec = {"model": bench.kind, "mode": mode, "max_items": max_items, "load": {"before": load_average()}}
    sampler.start()
    try:
        rec["start_s"] = server.start(sampler)
        url = server.url
        if not bench.keys:
            prepare(bench, url, args.clients, args.requests, key_sets, min(group, max_items))
        rec["keygen_s"], rec["encrypt_s"] = bench.keygen_s, bench.encrypt_s
        # the key sets, uploaded by each group's first client
        t0 = time.perf_counter()
        key_ids = []
        for g in range(key_sets):
            rm = Client(url).model(bench.name)
            rm.circuit.keys = bench.keys[g]
            key_ids.append(rm.upload_keys())
        rec["upload_s"] = time.perf_counter() - t0
        # warm-up: every batch size a launch may run at, then one concurrent round
        t0 = time.perf_counter()
        warm_wrong = warm_lost = 0
        cl = Client(url, retries=args.retries)
        for b in sorted(s for s in bench.sizes if s <= _bucket(min(group, max_items))):
            enc, want = bench.sizes[b]
            answered_by = set()
            for _ in range(20 * args.workers):  # until every worker has compiled this size (each its own)
                o = Outcome(-1, b)
                try:
                    o.outs, o.worker = _run_request(cl, bench.name, enc)
                except Exception as e:  # noqa: BLE001
                    o.error = f"{type(e).__name__}: {e}"[:300]
                ok = _check(bench, o, key_sets, want)
                warm_lost += ok is None
                warm_wrong += ok is False
                answered_by.add(o.worker)
                if ok is None or len(answered_by) >= args.workers:
                    break
        rec["compile_s"] = time.perf_counter() - t0
        outcomes, _ = _load_round(bench, url, [[0] for _ in range(args.clients)], args.retries)
        for o in outcomes:
            ok = _check(bench, o, key_sets, bench.requests[o.client][0][1])
            warm_lost += ok is None
            warm_wrong += ok is False
        rec["warmup_s"] = time.perf_counter() - t0
        rec["warmup_wrong"], rec["warmup_lost"] = warm_wrong, warm_lost
        before, _ = scrape(url, args.workers)
        # the timed load
        if time.time() > deadline:
            raise TimeoutError("past --timeout before the load")
        PROGRESS.reset()
        total = args.clients * args.requests
        kill = {}
        if mode == "kill_restart":
            def killer():
                while PROGRESS.done < total // 2:
                    time.sleep(0.01)
                try:
                    kill["scraped"], _ = scrape(url, args.workers)
                except Exception as e:  # noqa: BLE001
                    kill["scrape_error"] = str(e)
                kill["at_request"] = PROGRESS.done
                old = _tree(server.proc.pid)
                t = time.perf_counter()
                server.kill9()
                kill["killed_pids"] = old
                try:
                    kill["restart_s"] = server.start(sampler)
                except Exception as e:  # noqa: BLE001
                    kill["restart_error"] = str(e)
                kill["restart_total_s"] = time.perf_counter() - t
                kill["new_pids"] = _tree(server.proc.pid) if server.proc else []

            threading.Thread(target=killer, daemon=True).start()
        picks = [list(range(1, args.requests + 1)) for _ in range(args.clients)]
        outcomes, wall = _load_round(bench, url, picks, args.retries)
        after, disk = scrape(url, args.workers)
        rec["load"]["after"] = load_average()
        if "scraped" in kill:
            after = {**kill["scraped"], **after}  # the killed server's workers, then the new ones
        launches, mean_req, max_req = _launch_stats(_minus(after, before))
        _, mean_items, max_items_ = _launch_stats(_minus(after, before), "crossfhe_batch_items")
        lat = [o.latency_s for o in outcomes if o.latency_s is not None]
        wrong = lost = 0
        errors = []
        for o in outcomes:
            ok = _check(bench, o, key_sets, bench.requests[o.client][o.index][1])
            lost += ok is None
            wrong += ok is False
            if ok is not True and o.error:
                errors.append(f"client {o.client} request {o.index}: {o.error}")
        answered = len(outcomes) - lost
        ms = np.array(lat) * 1e3 if lat else np.array([np.nan])
        rec.update({
            "clients": args.clients, "requests_per_client": args.requests, "key_sets": key_sets,
            "key_ids": key_ids, "requests": len(outcomes), "answered": answered, "wrong": wrong, "lost": lost,
            "errors": errors[:10], "wall_s": wall,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "min_ms": float(ms.min()), "max_ms": float(ms.max()),
            "requests_per_s": answered / wall if wall > 0 else None,
            "items_per_s": answered / wall if wall > 0 else None,  # one item per request
            "launches": launches, "mean_requests_per_launch": mean_req, "max_requests_per_launch_le": max_req,
            "mean_items_per_launch": mean_items, "max_items_per_launch_le": max_items_,
            "workers_seen": sorted({o.worker for o in outcomes if o.outs is not None}),
            "keys_on_disk": disk,
        })
        if mode == "kill_restart":
            rec["kill"] = {k: v for k, v in kill.items() if k != "scraped"}
    except Exception as e:  # noqa: BLE001 - a phase that failed is reported (and fails the run), the rest go on
        rec["failed"] = f"{type(e).__name__}: {e}"
        print(f"# {tag} failed: {rec['failed']}", file=sys.stderr, flush=True)
    finally:
        sampler.sample()
        server.stop()
        sampler.stop()
    rec["memory_mib"] = sampler.series
    rec["peak_mib"] = max((m for _, m in sampler.series), default=None)
    print(f"# {tag}: {rec.get('answered', 0)}/{args.clients * args.requests} answered, {rec.get('wrong')} wrong, "
          f"{rec.get('lost')} lost, {rec.get('requests_per_s') or 0:.2f} req/s", file=sys.stderr, flush=True)
    return rec


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


def to_record(r: dict, bench: Bench, args, jax_version: str, backend: str) -> dict:
    """A benchmarks record (BENCHMARKS.md) of one phase, with the serving fields beside."""
    note = (f"{r['clients']} clients x {r['requests_per_client']} requests, {r['key_sets']} key sets, "
            f"window {args.window_ms} ms, max {r['max_items']} items per launch, {args.workers} workers"
            if "clients" in r else r.get("failed", ""))
    return {"suite": "serve", "name": f"{r['model']}_{r['mode']}",
            "params": {"model": bench.name, "params": bench.params, "max_items": r["max_items"],
                       "window_ms": args.window_ms, "workers": args.workers, "clients": args.clients,
                       "requests_per_client": args.requests, "key_sets": args.key_sets},
            "median_ms": r.get("p50_ms"), "min_ms": r.get("min_ms"), "max_ms": r.get("max_ms"),
            "reps": r.get("answered"), "device": backend, "backend": backend, "jax": jax_version,
            "threads": os.cpu_count(), "peer": None, "peer_median_ms": None, "ratio": None, "floor_ms": None,
            "note": note, **{k: v for k, v in r.items() if k not in ("model", "mode", "max_items")}}


def print_table(out: dict) -> None:
    from crossfhe.cli.benchutil import fmt

    head = (f"{'model':<6}{'phase':<13}{'items':>6}{'req':>5}{'ans':>5}{'wrong':>6}{'lost':>5}{'p50 ms':>9}"
            f"{'p99 ms':>9}{'req/s':>8}{'req/launch':>11}{'max<=':>6}{'compile s':>10}{'warmup s':>9}"
            f"{'peak MiB':>9}{'gain':>6}")
    print(head, file=sys.stderr)
    print("-" * len(head), file=sys.stderr)
    for r in out["records"]:
        gain = r.get("gain")
        print(f"{r['name'].split('_')[0]:<6}{r['name'].split('_', 1)[1]:<13}{r['params']['max_items']:>6}"
              f"{fmt(r.get('requests'), 5, 'd')}{fmt(r.get('answered'), 5, 'd')}{fmt(r.get('wrong'), 6, 'd')}"
              f"{fmt(r.get('lost'), 5, 'd')}{fmt(r.get('p50_ms'), 9)}{fmt(r.get('p99_ms'), 9)}"
              f"{fmt(r.get('requests_per_s'), 8, '.2f')}{fmt(r.get('mean_requests_per_launch'), 11, '.2f')}"
              f"{fmt(r.get('max_requests_per_launch_le'), 6, '.0f')}{fmt(r.get('compile_s'), 10, '.2f')}"
              f"{fmt(r.get('warmup_s'), 9, '.2f')}{fmt(r.get('peak_mib'), 9, '.0f')}{fmt(gain, 6, '.2f')}",
              file=sys.stderr)
        if r.get("kill"):
            k = r["kill"]
            print(f"      kill -9 after {k.get('at_request')} answers; healthy again in "
                  f"{fmt(k.get('restart_total_s'), 0, '.1f').strip()} s; keys on disk after: {r.get('keys_on_disk')}"
                  + (f"; restart error: {k['restart_error']}" if k.get("restart_error") else ""), file=sys.stderr)
        if r.get("failed"):
            print(f"      failed: {r['failed']}", file=sys.stderr)
        for e in r.get("errors", [])[:3]:
            print(f"      {e}", file=sys.stderr)
    for m, b in out["models"].items():
        print(f"{m}: {b['params']}, keys {b['keygen_s']:.1f} s for {out['key_sets']} sets, encryption "
              f"{b['encrypt_s']:.1f} s", file=sys.stderr)
    print(f"cpu {out['cpu']} ({out['cpus']} CPUs); load {out['load']}; wall {out['wall_s']:.0f} s; "
          f"{'OK' if out['ok'] else 'FAILED'}", file=sys.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=8, help="concurrent clients (threads)")
    p.add_argument("--requests", type=int, default=8, help="requests per client and phase")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--key-sets", type=int, default=2, help="key sets the clients share (client i uses set i mod K)")
    p.add_argument("--window-ms", type=float, default=5.0)
    p.add_argument("--max-items", type=int, default=64, help="the batched phase's items per launch")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--retries", type=int, default=6, help="the clients' retries (crossfhe.client.Client's default)")
    p.add_argument("--kill-restart", action="store_true", help="a TFHE phase with the server killed (-9) midway")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds for the whole run")
    p.add_argument("--json")
    p.add_argument("--quick", action="store_true", help="insecure small parameters, 4 clients x 3 requests")
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.requests = 4, 3
    kinds = [m for m in args.models.split(",") if m]
    if not kinds or set(kinds) - set(MODELS):
        p.error(f"--models: a comma-separated subset of {','.join(MODELS)}")
    if min(args.clients, args.requests, args.key_sets, args.max_items, args.workers) < 1:
        p.error("--clients, --requests, --key-sets, --max-items and --workers are at least 1")
    args.key_sets = min(args.key_sets, args.clients)

    t_start = time.perf_counter()
    deadline = time.time() + args.timeout
    expired = threading.Event()

    done = threading.Event()

    def watchdog():
        if done.wait(args.timeout):
            return
        expired.set()
        print(f"# past --timeout {args.timeout:.0f} s: killing the servers", file=sys.stderr, flush=True)
        for s in list(LIVE):
            s.kill9()

    threading.Thread(target=watchdog, daemon=True, name="watchdog").start()

    import jax

    out = {"suite": "serve", "cpu": cpu_name(), "cpus": os.cpu_count(), "load": {"start": load_average()},
           "jax": jax.__version__, "clients": args.clients, "requests": args.requests, "key_sets": args.key_sets,
           "window_ms": args.window_ms, "max_items": args.max_items, "workers": args.workers,
           "quick": args.quick, "ckks_bound": CKKS_BOUND, "models": {}, "records": []}
    backend = jax.default_backend()
    with tempfile.TemporaryDirectory(prefix="crossfhe-bench-serve-") as tmp:
        root = Path(tmp)
        benches = export_models(kinds, args.quick, root)
        for kind in kinds:
            bench = benches[kind]
            modes = ["batched", "one"] + (["kill_restart"] if kind == "tfhe" and args.kill_restart else [])
            phases = {}
            for mode in modes:
                if expired.is_set():
                    phases[mode] = {"model": kind, "mode": mode, "max_items": 1 if mode == "one" else args.max_items,
                                    "failed": "skipped: past --timeout"}
                    continue
                phases[mode] = run_phase(bench, mode, args, root, deadline)
            b, o = phases["batched"].get("requests_per_s"), phases["one"].get("requests_per_s")
            phases["batched"]["gain"] = b / o if b and o else None
            for mode in modes:
                out["records"].append(to_record(phases[mode], bench, args, jax.__version__, backend))
            out["models"][kind] = {"name": bench.name, "params": bench.params, "keygen_s": bench.keygen_s,
                                   "encrypt_s": bench.encrypt_s}
    done.set()
    out["load"]["end"] = load_average()
    out["wall_s"] = time.perf_counter() - t_start
    out["expired"] = expired.is_set()
    bad = [r for r in out["records"] if r.get("failed") or r.get("wrong") or r.get("lost") or r.get("warmup_wrong")
           or r.get("warmup_lost")]
    out["ok"] = not bad and not expired.is_set()
    print(json.dumps(out, default=float))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
    print_table(out)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
