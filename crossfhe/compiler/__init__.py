"""Deprecated: the circuit compiler is part of the one front end, :mod:`crossfhe.api` (circuits are compiled from the
same value classes that run eagerly). ``crossfhe.compile``, ``crossfhe.circuit``, ``crossfhe.CKKSVector``,
``crossfhe.BFVVector``, ``crossfhe.TFHEInt`` and ``crossfhe.api.circuit.load`` are the names to use; the old module
paths below keep working for one release and warn.

=============================  ==========================================
old                            new
=============================  ==========================================
``crossfhe.compiler``          ``crossfhe`` / ``crossfhe.api.circuit``
``crossfhe.compiler.ir``       ``crossfhe.api.ir``
``crossfhe.compiler.trace``    ``crossfhe.api.trace``
``crossfhe.compiler.circuit``  ``crossfhe.api.circuit``
``crossfhe.compiler.specs``    ``crossfhe.api.specs``
``crossfhe.compiler.ckks``     ``crossfhe.api.ckks_lower``
``crossfhe.compiler.bfv``      ``crossfhe.api.bfv_lower``
``crossfhe.compiler.tfhe``     ``crossfhe.api.tfhe_lower``
=============================  ==========================================
"""

import importlib
import sys
import warnings

from crossfhe.api.circuit import Circuit, CircuitKeys, Encrypted, cache_dir, circuit, compile, load  # noqa: A004
from crossfhe.api.ir import CircuitError, Graph, Node
from crossfhe.api.specs import BFVVector, CKKSVector, TFHEInt

MOVED = {"ir": "crossfhe.api.ir", "trace": "crossfhe.api.trace", "circuit": "crossfhe.api.circuit",
         "specs": "crossfhe.api.specs", "ckks": "crossfhe.api.ckks_lower", "bfv": "crossfhe.api.bfv_lower",
         "tfhe": "crossfhe.api.tfhe_lower"}

warnings.warn("crossfhe.compiler is deprecated and will be removed in the next release: circuits are part of the one "
              "front end, crossfhe.api (crossfhe.compile, crossfhe.circuit, crossfhe.CKKSVector, ...; the module paths "
              "are listed in crossfhe.compiler.MOVED)", DeprecationWarning, stacklevel=2)

for _old, _new in MOVED.items():
    _module = importlib.import_module(_new)
    sys.modules[f"{__name__}.{_old}"] = _module
    globals()[_old] = _module

__all__ = ["BFVVector", "CKKSVector", "Circuit", "CircuitError", "CircuitKeys", "Encrypted", "Graph", "Node",
           "TFHEInt", "cache_dir", "circuit", "compile", "load"]
