"""A circuit run over several processes (hosts) with JAX's distributed runtime: each process evaluates its share of
the batch on its local devices; crossfhe adds no scheduler of its own.

    python examples/multihost_circuit.py client  DIR            # key owner: keys, encrypted batch -> DIR
    python examples/multihost_circuit.py server  DIR --process-id 0 --num-processes 2 --coordinator HOST:PORT
    python examples/multihost_circuit.py server  DIR --process-id 1 --num-processes 2 --coordinator HOST:PORT
    python examples/multihost_circuit.py decrypt DIR            # key owner: results

On one machine, start the two servers with ``--coordinator localhost:12355`` (in two shells, or with ``&``). On a
cluster, run one server per host with the same coordinator address (the first host's); each reads the shared DIR
(or its own copy of the public files) and writes its share of the results. Only public material crosses: the
evaluation keys and the encrypted values (``crossfhe.io``); the secret key stays in DIR/secret.key with the client.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import crossfhe
import crossfhe.io as io
from crossfhe.api import Encrypted
from crossfhe.ckks import presets

BATCH = 8


def scores(x, w):
    """A linear score and its square, per item: (x . w) and (x . w)^2 in every slot."""
    s = x @ w
    return s, s * s


def build():
    return crossfhe.compile(scores, crossfhe.CKKSVector(16), crossfhe.CKKSVector(16), params=presets.N13_L3)


def client(d: Path) -> None:
    circuit = build()
    keys = circuit.keygen()
    io.save_secret_key(keys.secret, d / "secret.key", params=circuit.params)
    io.save(keys.public, d / "public.keys")
    rng = np.random.default_rng(0)
    x, w = rng.uniform(-1, 1, (BATCH, 16)), rng.uniform(-1, 1, (BATCH, 16))
    np.save(d / "plain.npy", np.stack([x, w]))  # only to check the results in this example
    for i, v in enumerate(circuit.encrypt(x, w)):
        io.save(v, d / f"input{i}.bin")
    print(f"client: {BATCH} encrypted items and the evaluation keys in {d}")


def server(d: Path, process_id: int, num_processes: int, coordinator: str) -> None:
    import jax

    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)
    me, n = jax.process_index(), jax.process_count()
    circuit = build()
    public = io.load(d / "public.keys", params=circuit.params)
    inputs = [io.load(d / f"input{i}.bin") for i in range(2)]
    share = slice(me * BATCH // n, (me + 1) * BATCH // n)
    outs = circuit.run(*(x[share] for x in inputs), keys=public)  # sharded over this process's local devices
    for j, o in enumerate(outs):
        io.save(o, d / f"output{j}.part{me}")
    print(f"server {me}/{n}: items {share.start}..{share.stop - 1} on {len(jax.local_devices())} local device(s)")
    jax.distributed.shutdown()


def decrypt(d: Path) -> None:
    circuit = build()
    secret = io.load_secret_key(d / "secret.key", params=circuit.params)
    public = io.load(d / "public.keys", params=circuit.params)
    keys = crossfhe.api.CircuitKeys(secret, public)
    parts = sorted(d.glob("output0.part*"), key=lambda p: int(p.suffix[5:]))
    outs = [Encrypted.concatenate([io.load(d / f"output{j}{p.suffix}") for p in parts]) for j in range(2)]
    s, s2 = circuit.decrypt(*outs, keys=keys)
    x, w = np.load(d / "plain.npy")
    want = (x * w).sum(axis=1)
    print("scores:", np.round(s[:, 0], 4))
    print("max error:", float(np.abs(s[:, 0] - want).max()), float(np.abs(s2[:, 0] - want**2).max()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("role", choices=("client", "server", "decrypt"))
    p.add_argument("dir", type=Path)
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--coordinator", default="localhost:12355")
    a = p.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    if a.role == "client":
        client(a.dir)
    elif a.role == "server":
        server(a.dir, a.process_id, a.num_processes, a.coordinator)
    else:
        decrypt(a.dir)


if __name__ == "__main__":
    main()
