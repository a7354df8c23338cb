"""Circuits: trace a Python function over encrypted values, optimize it, compile it once, run it batched.

    import crossfhe
    from crossfhe.compiler import CKKSVector
    from crossfhe.ckks import presets

    @crossfhe.circuit(CKKSVector(1000), CKKSVector(1000), params=presets.N14_L7)
    def f(x, y):
        return x * y + 0.5 * x - 2, x @ y, x.rotate(1)

    f.keygen()                            # exactly the keys f needs (its rotations are found by tracing)
    z, ip, r = f.encrypt_run_decrypt(a, b)

Layers: :mod:`~crossfhe.compiler.trace` (symbolic values) -> :mod:`~crossfhe.compiler.ir` (a printable graph)
-> the scheme's passes (level and scale placement, CSE, rotation hoisting, lazy relinearization; for TFHE
key-switch and accumulator dedup and batched bootstraps) -> :mod:`~crossfhe.compiler.circuit` (one jitted
program per backend and batch shape; caches; export).
"""

from crossfhe.compiler.circuit import Circuit, CircuitKeys, Encrypted, cache_dir, circuit, compile, load
from crossfhe.compiler.ir import CircuitError, Graph, Node
from crossfhe.compiler.specs import BFVVector, CKKSVector, TFHEInt

__all__ = ["BFVVector", "CKKSVector", "Circuit", "CircuitError", "CircuitKeys", "Encrypted", "Graph", "Node",
           "TFHEInt", "cache_dir", "circuit", "compile", "load"]
