"""Circuits: :func:`compile` traces a function over encrypted inputs, optimizes its graph and lowers it to one
``jax.jit`` program per backend and input batch shape.

    circuit = crossfhe.compile(f, CKKSVector(1000), CKKSVector(1000), params=presets.N14_L7)
    circuit.keygen()                          # exactly the keys the circuit needs (its rotations found by tracing)
    out = circuit.encrypt_run_decrypt(x, y)   # or encrypt / run / decrypt, on a client and a server

What a scheme gives the compiler is a :class:`Scheme` (``crossfhe.api.ckks_lower``, ``bfv``, ``tfhe``). The lowered
program takes and returns flat tuples of arrays: each encrypted value is the tuple of its arrays (``leaves``;
what they mean is the scheme's ``interpret``/``decrypt`` and the value's node in the graph), and the evaluation keys,
the plans and the constants are pytrees made once outside the trace (``Scheme.runtime``) and passed as
arguments, never closed over. A batch of inputs (leading axes) is ``jax.vmap`` of the per-item program; with more
than one local device the batch is sharded over them (``jax.sharding``), keys and plans replicated.

Caches. Compiled programs are kept per (batch shape, devices) in the circuit; across processes, the lowered
program is saved with ``jax.export`` under the user's cache directory (:func:`cache_dir`) keyed by the graph,
the parameters, the kernel set, the backend, the jax versions and a digest of the library's sources (each entry
checksummed), and JAX's persistent compilation cache is turned on for the process (when the user has not
configured one) so the XLA compiles of keygen, encryption and the program are reused too. Opt out per circuit
with ``compile(..., cache=False)`` or for the process with ``CROSSFHE_CIRCUIT_CACHE=0``.

Security. :class:`CircuitKeys` holds the secret key and refuses pickling and ``crossfhe.io.dumps``; encrypted
values (:class:`Encrypted`), exported files and cache entries hold public material only.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from crossfhe import runtime
from crossfhe.api.ir import CircuitError, Graph
from crossfhe.api.specs import BFVVector, CKKSVector, InputSpec, TFHEInt, TFHEInteger
from crossfhe.api.trace import Trace, Value
from crossfhe.core.keys import SecretHolder
from crossfhe.errors import KeyMismatchError, ParameterError, SerializationError
from crossfhe.io import circuit_file, circuit_value
from crossfhe.math import xla

FORMAT = circuit_file.MAGIC
"""The magic of an exported circuit file (:mod:`crossfhe.io.circuit_file`)."""


# --------------------------------------------------------------------------------------------------
# What a scheme provides
# --------------------------------------------------------------------------------------------------


class Scheme:
    """The compiler's view of one scheme. Every method is pure; ``params`` is the scheme's parameter object.

    - ``trace_input(trace, index, spec) -> Value``: the symbolic value of input ``index`` (appends the ``input``
      node and its index to ``trace.inputs``); ``output_node(trace, value) -> int``.
    - ``passes(optimize) -> [(name, fn(graph, params) -> graph)]``: the passes, in order (``optimize`` False: only
      the ones needed to run); the last ones annotate what lowering needs (levels, scales, ranges) and raise
      :class:`CircuitError` for a circuit that cannot run on ``params``. ``annotated_after``: the pass names after
      which ``cost`` may read those annotations.
    - ``cost(graph, params, annotated=True) -> dict``: operation counts (ints) and, annotated, ``depth``.
    - ``select(graph, precision=, bits=) -> params``: the smallest secure preset that fits;
      ``prepare_params(params)``: checked, kernel set resolved.
    - ``requirements(graph, params) -> dict``: the evaluation keys the graph needs (JSON-able).
    - ``keygen(params, requirements, seed) -> (secret, public)``: exactly those keys.
    - ``check_keys(graph, params, public, key_id)``: raise for keys that do not serve (missing, other parameters,
      another key pair than the inputs').
    - ``encrypt(params, public, spec, values) -> (leaves, batch_shape, key_id)``: ``public`` is what
      ``keygen`` returned second.
    - ``decrypt(params, secret, graph, node, leaves, batch_shape) -> np.ndarray`` for output node ``node``.
    - ``leaf_specs(graph, params, node) -> [(item shape, dtype, moduli, limb axis) per leaf]`` of node ``node``'s
      value: what its arrays must be (``input_shapes`` at a batch shape derives from it).
    - ``runtime(graph, params, public, one_program=True) -> pytree`` of arrays: keys, plans and constants the
      program takes (``one_program`` False: those of a graph run operation by operation, :meth:`by_operation`).
    - ``interpret(graph, params, inputs, runtime, items=1) -> [leaves per output]``: the circuit on one item
      (traceable; ``inputs``: a tuple of leaf tuples, one per input); ``items``: how many items the caller's
      ``vmap`` around it runs at once (a kernel may pick its route by the whole batch: TFHE's key switch).
    - ``by_operation(graph) -> bool``: True where an eager value's one-operation graph runs operation by
      operation, each operation its own cached compiled program shared with every other call (a CKKS bootstrap:
      as one program it compiles for about a minute at N 2^16 on a CPU, and with the kept heap of
      :func:`crossfhe.runtime.keep_heap` runs slower than its operations); default False. A compiled circuit
      always runs as one program, a bootstrap's tables among its arguments, and over a batch such a graph's
      items run one after another inside it (:meth:`Circuit._flat_fn`).
    - ``value_attrs``, ``item_ndims``, ``eager_key``, ``eager_output``, ``eager_passes``, ``with_constants``,
      ``x64``: what eager values need to run one operation as a one-node circuit (:mod:`crossfhe.api.eager`).
    - ``params_digest(params)``, ``kernels(params)``, ``build_id(params)``, ``custom_calls(params)``: identity,
      kernel set, native build and custom-call targets of ``params``; ``graph_to_json``/``spec_to_json`` and
      inverses (defaults here).
    """

    name = "?"
    annotated_after: frozenset = frozenset()
    """Names of the passes after which the graph carries the annotations ``cost`` reads (levels, ranges)."""
    secret_key_encryption = False
    """True where encryption takes the secret key (TFHE's LWE): :meth:`Circuit.encrypt` then passes
    ``CircuitKeys.secret`` to ``encrypt`` instead of the public keys."""

    materialize_kernels = False
    """True where a compiled circuit's program materializes each kernel's result
    (:func:`crossfhe.math.xla.materializing`): measured per scheme (benchmarks/README.md, "Circuits without
    recomputation")."""

    value_class: type | None = None
    """The scheme's value class (registered by its module, :mod:`crossfhe.api.ckks`, ``bfv``, ``tfhe``): inputs of a
    traced function are symbolic values of it."""

    def input_attrs(self, index: int, spec) -> dict:
        """The attributes of input ``index``'s node."""
        return {"index": index}

    def trace_input(self, trace, index: int, spec):
        """The symbolic value of input ``index`` (its ``input`` node appended, its index to ``trace.inputs``)."""
        node = trace.node("input", (), self.input_attrs(index, spec), loc=f"input {index}")
        trace.inputs.append(node)
        return self.value_class.symbolic(trace, node, spec)

    def output_node(self, trace, value, position: int = 0) -> int:
        """The node standing for output ``position`` (default: the value's own node)."""
        return value.node

    def prepare_params(self, params):
        """``params`` checked and with its kernel set resolved (default: unchanged)."""
        return params

    def input_shapes(self, graph, params, batch) -> list:
        """[[(shape, dtype) per leaf] per input] of the inputs at ``batch`` (from :meth:`leaf_specs`)."""
        return [[(tuple(batch) + tuple(shape), dtype) for shape, dtype, _, _ in self.leaf_specs(graph, params, i)]
                for i in graph.inputs]

    def eager_key(self, attrs: dict) -> tuple:
        """The part of an eager operand's metadata (its input node's attributes) that decides the program."""
        return ()

    def x64(self, params) -> bool:
        """Whether the scheme's programs run inside ``jax.enable_x64`` (:meth:`scope`)."""
        return False

    def by_operation(self, graph) -> bool:
        """Whether an eager value's one-operation ``graph`` runs operation by operation rather than as one program
        (class docstring); default False."""
        return False

    def graph_to_json(self, graph: Graph) -> dict:
        from crossfhe.api.ir import graph_to_json

        return graph_to_json(graph)

    def graph_from_json(self, data: dict) -> Graph:
        from crossfhe.api.ir import graph_from_json

        return graph_from_json(data)

    def spec_to_json(self, spec) -> dict:
        import dataclasses

        return {"type": type(spec).__name__, **dataclasses.asdict(spec)}

    def spec_from_json(self, data: dict):
        data = dict(data)
        kind = data.pop("type", None)
        cls = {c.__name__: c for c in (CKKSVector, BFVVector, TFHEInt, TFHEInteger)}.get(kind)
        if cls is None:
            raise SerializationError(f"an input spec of unknown type {kind!r}")
        return cls(**data)

    def params_digest(self, params) -> str:
        """The identity of ``params`` (default: their ``digest()``)."""
        return params.digest()

    def kernels(self, params):
        """The kernel set ``params`` run on (default: their ``kernels``)."""
        return params.kernels

    def encrypt_input(self, graph: Graph, params, public, index: int, spec, values):
        """Encrypt input ``index`` of ``graph`` (default: :meth:`encrypt`, which does not depend on the graph)."""
        return self.encrypt(params, public, spec, values)

    def scope(self, params):
        """The context the programs are traced and run in: ``jax.enable_x64`` where :meth:`x64` (TFHE's float64
        Fourier kernels), else none."""
        import contextlib

        return jax.enable_x64(True) if self.x64(params) else contextlib.nullcontext()

    def custom_calls(self, params) -> tuple[str, ...]:
        """The XLA custom-call targets the lowered program may contain (exported with them allowed)."""
        return ()

    def build_id(self, params) -> str:
        """An identifier of the native build the program's custom calls come from ('' if none)."""
        return ""


class RingScheme(Scheme):
    """A scheme on the RNS substrate (CKKS, BFV): its programs may call the native NTT kernels."""

    def custom_calls(self, params) -> tuple[str, ...]:
        from crossfhe.kernels import gpu_native
        from crossfhe.ring import ntt

        kernels = params.kernels.resolve()
        return ntt.native_targets() if kernels.native else gpu_native.targets() if kernels.gpu else ()

    def build_id(self, params) -> str:
        from crossfhe.kernels import gpu_native
        from crossfhe.ring import ntt

        kernels = params.kernels.resolve()
        return ntt.native_build() if kernels.native else gpu_native.build_id() if kernels.gpu else ""


def key_switch_counts(g: Graph, relins: int, rotations: tuple[str, ...]) -> dict:
    """A ring graph's key switches: ``relins`` relinearizations, one per node whose op is in ``rotations`` and one per
    step of each ``rotate_many``. ``modups``: the key switches' ModUps, where a ``rotate_many``'s steps share one."""
    c = g.counts()
    single = sum(c[op] for op in rotations)
    rots = single + sum(len(n.attr("ks")) for n in g.nodes if n.op == "rotate_many")
    return {"key_switches": relins + rots, "relinearizations": relins, "rotations": rots,
            "modups": relins + single + c["rotate_many"]}


def schemes() -> dict[str, Scheme]:
    """The schemes by name (imported on first use)."""
    import importlib

    out = {}
    for name in ("ckks", "bfv", "tfhe", "integer"):
        try:
            out[name] = importlib.import_module(f"crossfhe.api.{name}_lower").SCHEME
        except ModuleNotFoundError as e:
            if e.name != f"crossfhe.api.{name}_lower":
                raise
    return out


# --------------------------------------------------------------------------------------------------
# Caches
# --------------------------------------------------------------------------------------------------


def cache_dir() -> Path | None:
    """Where compiled circuits are kept across processes: :func:`crossfhe.runtime.cache_dir` ($CROSSFHE_CACHE_DIR,
    else $XDG_CACHE_HOME/crossfhe, else ~/.cache/crossfhe); None when ``CROSSFHE_CIRCUIT_CACHE`` is 0/off/false."""
    if os.environ.get("CROSSFHE_CIRCUIT_CACHE", "1").lower() in ("0", "off", "false", "no"):
        return None
    return runtime.cache_dir()


def _platform(device) -> str:
    """The platform name jax.export uses for ``device`` ("cpu", "cuda", "rocm", "tpu")."""
    if device.platform == "gpu":
        return "rocm" if "rocm" in str(getattr(device.client, "platform_version", "")).lower() else "cuda"
    return device.platform


def _options() -> dict:
    """The library's compile options (:data:`crossfhe.math.xla.CPU_OPTIONS`: XLA:CPU code generation, read by no
    other backend) for a circuit's program, wherever it runs."""
    from crossfhe.math import xla

    return {"compiler_options": xla.CPU_OPTIONS} if xla.ENABLED else {}


def _versions() -> str:
    return f"crossfhe sources {runtime.source_digest()}, jax {jax.__version__}, jaxlib {jax.lib.__version__}"


# --------------------------------------------------------------------------------------------------
# Values the user holds
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Encrypted:
    """An encrypted input or output of a circuit: its arrays (``leaves``, batch axes first), the batch shape, the
    key pair's id and where it belongs (``circuit`` digest, ``position``, ``output`` or input). Public material
    only; :meth:`Circuit.decrypt` reads outputs."""

    leaves: tuple
    batch_shape: tuple[int, ...]
    key_id: str | None
    circuit: str
    position: int
    output: bool
    checked: bool = True
    """False for a value read from a blob without its circuit: its leaves' shapes and residues are checked against
    the circuit where it is used (:meth:`Circuit.run`, :meth:`Circuit.decrypt`), or at once by
    :meth:`Circuit.load_value`."""

    def __repr__(self) -> str:
        kind = "output" if self.output else "input"
        return f"Encrypted({kind} {self.position} of circuit {self.circuit[:12]}, batch {self.batch_shape})"

    def __getitem__(self, index) -> Encrypted:
        """The items ``index`` (an int or a slice) of the first batch axis."""
        if not self.batch_shape:
            raise ParameterError("this encrypted value has no batch axis to index")
        if not isinstance(index, (int, slice)):
            raise TypeError(f"index the batch with an int or a slice, got {type(index).__name__}")
        leaves = tuple(x[index] for x in self.leaves)
        batch = tuple(np.shape(leaves[0])[: len(self.batch_shape) - (1 if isinstance(index, int) else 0)])
        return Encrypted(leaves, batch, self.key_id, self.circuit, self.position, self.output, self.checked)

    @staticmethod
    def concatenate(values) -> Encrypted:
        """Values of one circuit position joined along the first batch axis (the inverse of slicing)."""
        values = list(values)
        first = values[0]
        for v in values[1:]:
            if (v.circuit, v.position, v.output, v.key_id) != (first.circuit, first.position, first.output,
                                                                first.key_id) or not v.batch_shape:
                raise ParameterError("concatenate takes batched values of one circuit position and key pair")
        leaves = tuple(np.concatenate([np.asarray(v.leaves[i]) for v in values]) for i in range(len(first.leaves)))
        batch = (sum(v.batch_shape[0] for v in values),) + first.batch_shape[1:]
        return Encrypted(leaves, batch, first.key_id, first.circuit, first.position, first.output,
                         all(v.checked for v in values))

    KIND = "circuit.value"

    def serialize(self) -> bytes:
        """A checked blob (kind ``circuit.value``, :mod:`crossfhe.io.circuit_value`): the arrays and where they
        belong; also ``crossfhe.io.dumps(x)``."""
        return circuit_value.pack_circuit_value(self.leaves, batch_shape=self.batch_shape, key_id=self.key_id,
                                                circuit=self.circuit, position=self.position, output=self.output)

    @classmethod
    def load(cls, blob) -> Encrypted:
        """The value of a :meth:`serialize` blob, its layout checked (SerializationError if it is damaged or of
        another kind); its shapes and residues are checked against the circuit where it is used, or at once with
        :meth:`Circuit.load_value`."""
        v = circuit_value.unpack_circuit_value(blob)
        return cls(v.leaves, v.batch_shape, v.key_id, v.circuit, v.position, v.output, checked=False)


@dataclass(frozen=True)
class CircuitKeys(SecretHolder):
    """A circuit's keys: ``secret`` (the key owner's; never sent, never pickled) and ``public`` (evaluation keys:
    send these, e.g. ``crossfhe.io.dumps(keys.public)``)."""

    secret: Any
    public: Any

    SAVE_WITH = "crossfhe.io.save_secret_key(keys.secret, path, params=circuit.params); send keys.public"

    def __repr__(self) -> str:
        return f"CircuitKeys(secret=<hidden>, public={self.public!r})"


# --------------------------------------------------------------------------------------------------
# The circuit
# --------------------------------------------------------------------------------------------------


@dataclass
class Circuit:
    """A compiled circuit: its optimized ``graph`` (print it), the ``params``, the input ``specs``, the evaluation
    keys it needs (``requirements``), its depth and operation counts (``cost``), the counts before and after each
    pass (``report``), and the programs per batch shape."""

    graph: Graph
    params: Any
    specs: tuple
    scheme: Scheme
    traced: Graph | None = None
    report: list = field(default_factory=list)
    cache: bool = True
    name: str = "circuit"
    keys: CircuitKeys | None = None
    public_keys: Any = None
    model: dict | None = field(default=None, repr=False)
    _programs: dict = field(default_factory=dict, repr=False)
    _exported: dict = field(default_factory=dict, repr=False)
    _lifted: dict = field(default_factory=dict, repr=False)
    timings: dict = field(default_factory=dict, repr=False)

    # Description --------------------------------------------------------------------------------

    @functools.cached_property
    def digest(self) -> str:
        """The circuit's identity: its graph and its parameters (what keys and values are checked against)."""
        return hashlib.sha256((self.graph.digest() + self.scheme.params_digest(self.params)).encode()).hexdigest()

    @property
    def requirements(self) -> dict:
        """The evaluation keys this circuit needs (Galois elements, relinearization, bootstrapping keys)."""
        return self.scheme.requirements(self.graph, self.params)

    @property
    def cost(self) -> dict:
        """Operation counts of the optimized graph (key switches, bootstraps, NTT limbs, ...) and its depth."""
        return self.scheme.cost(self.graph, self.params)

    @property
    def depth(self) -> int:
        return self.cost.get("depth", 0)

    def __str__(self) -> str:
        return str(self.graph)

    def __repr__(self) -> str:
        return (f"Circuit({self.name}: {self.scheme.name}, {len(self.specs)} inputs, {len(self.graph.outputs)} "
                f"outputs, {len(self.graph.nodes)} nodes, params {self.scheme.params_digest(self.params)[:12]})")

    def report_table(self) -> str:
        """The counts before and after each pass, as a table."""
        keys = sorted({k for _, c in self.report for k in c})
        head = f"{'pass':<22}" + "".join(f" {k:>{max(6, len(k))}}" for k in keys)
        rows = [f"{name:<22}" + "".join(f" {c.get(k, '-'):>{max(6, len(k))}}" for k in keys) for name, c in self.report]
        return "\n".join([head, *rows])

    # Keys and values -----------------------------------------------------------------------------

    def keygen(self, seed: bytes | None = None) -> CircuitKeys:
        """Generate exactly the keys this circuit needs (kept in ``self.keys`` and returned). ``seed``: 32 bytes for
        reproducible keys (tests)."""
        secret, public = self.scheme.keygen(self.params, self.requirements, seed)
        self.keys = CircuitKeys(secret, public)
        return self.keys

    def _need_keys(self, what: str) -> CircuitKeys:
        if self.keys is None:
            raise ParameterError(f"{what}: the circuit has no keys; call circuit.keygen() first (or pass keys=)")
        return self.keys

    def encrypt(self, *values, keys=None) -> list[Encrypted]:
        """Encrypt one value per input (each may carry leading batch axes; all inputs one batch shape) under
        ``keys`` (CircuitKeys or the public keys; default the circuit's own)."""
        if len(values) != len(self.specs):
            raise ParameterError(f"{self.name} takes {len(self.specs)} inputs, got {len(values)}")
        material = self._key_material(keys, "encrypt", secret=self.scheme.secret_key_encryption)
        out, shapes = [], set()
        for i, (spec, v) in enumerate(zip(self.specs, values, strict=True)):
            leaves, batch, key_id = self.scheme.encrypt_input(self.graph, self.params, material, i, spec, v)
            shapes.add(tuple(batch))
            out.append(Encrypted(tuple(leaves), tuple(batch), key_id, self.digest, i, False))
        if len(shapes) > 1:
            raise ParameterError(f"{self.name}: the inputs have different batch shapes {sorted(shapes)}; give every "
                                 "input the same leading axes")
        return out

    def _key_material(self, keys, what: str, secret: bool = False):
        if keys is None and self.keys is None and self.public_keys is not None and not secret:
            keys = self.public_keys  # evaluation keys given to compile(keys=...)
        if keys is None:
            keys = self._need_keys(what)
        if isinstance(keys, CircuitKeys):
            return keys.secret if secret else keys.public
        return keys

    def _specs(self, x: Encrypted) -> list:
        node = self.graph.outputs[x.position] if x.output else self.graph.inputs[x.position]
        return [circuit_value.LeafSpec(tuple(shape), np.dtype(dtype).name, tuple(moduli), axis)
                for shape, dtype, moduli, axis in self.scheme.leaf_specs(self.graph, self.params, node)]

    def _verified(self, x: Encrypted) -> Encrypted:
        """``x`` with its leaves checked against the circuit (shapes, dtypes, residues in [0, q)) if they came from a
        blob without it; SerializationError names the leaf and the offending word."""
        if x.checked:
            return x
        count = len(self.graph.outputs) if x.output else len(self.specs)
        if not 0 <= x.position < count:
            raise SerializationError(f"{self.name}: the value is {'output' if x.output else 'input'} {x.position}, "
                                     f"the circuit has {count}")
        specs = self._specs(x)
        if len(specs) != len(x.leaves):
            raise SerializationError(f"{self.name}: the value holds {len(x.leaves)} arrays, this position takes "
                                     f"{len(specs)}")
        leaves = []
        for i, (leaf, spec) in enumerate(zip(x.leaves, specs, strict=True)):
            leaf = np.asarray(leaf)
            circuit_value._check_leaf(f"leaf{i}", leaf, tuple(x.batch_shape), spec)
            leaves.append(leaf)
        return Encrypted(tuple(leaves), x.batch_shape, x.key_id, x.circuit, x.position, x.output, True)

    def load_value(self, blob) -> Encrypted:
        """A ``circuit.value`` blob of this circuit, every check done now: its layout, that it belongs to this circuit,
        and its leaves' shapes, dtypes and residues (SerializationError; ParameterError for another circuit's)."""
        x = Encrypted.load(blob)
        if x.circuit != self.digest:
            raise ParameterError(f"{self.name}: the value belongs to another circuit (digest {x.circuit[:12]}, this "
                                 f"one is {self.digest[:12]})")
        return self._verified(x)

    def decrypt(self, *outputs, keys: CircuitKeys | None = None):
        """The values of encrypted outputs (one array each; a single output: the array itself)."""
        keys = keys or self._need_keys("decrypt")
        if not isinstance(keys, CircuitKeys):
            raise TypeError(f"decrypt takes the CircuitKeys with the secret key, got {type(keys).__name__}")
        res = []
        for x in outputs:
            if not isinstance(x, Encrypted) or not x.output:
                raise TypeError(f"decrypt takes this circuit's encrypted outputs, got {x!r}")
            if x.circuit != self.digest:
                raise ParameterError(f"decrypt: {x!r} is an output of another circuit")
            mine = getattr(keys.secret, "key_id", None)
            if x.key_id is not None and mine is not None and x.key_id != mine:
                raise KeyMismatchError(f"decrypt: {x!r} was computed under key pair {x.key_id}, these keys are "
                                       f"{mine}; decrypt with the keys it was encrypted under")
            x = self._verified(x)
            node = self.graph.outputs[x.position]
            res.append(self.scheme.decrypt(self.params, keys.secret, self.graph, node, x.leaves, x.batch_shape))
        return res[0] if len(res) == 1 else res

    # Running ---------------------------------------------------------------------------------------

    def run(self, *inputs: Encrypted, keys=None, devices=None) -> list[Encrypted]:
        """Run the circuit on encrypted inputs (from :meth:`encrypt`): one compiled program for their batch shape,
        the batch sharded over ``devices`` (default: all local devices, when the leading axis divides evenly).
        ``keys``: the evaluation keys (CircuitKeys or its ``public``; default the circuit's own)."""
        public = self._key_material(keys, "run")
        if len(inputs) != len(self.specs):
            raise ParameterError(f"{self.name} takes {len(self.specs)} inputs, got {len(inputs)}")
        batch, key_id = None, None
        inputs = [self._verified(x) if isinstance(x, Encrypted) and x.circuit == self.digest and not x.output
                  and x.position == i else x for i, x in enumerate(inputs)]
        for i, x in enumerate(inputs):
            if not isinstance(x, Encrypted) or x.output or x.position != i:
                raise ParameterError(f"{self.name}: input {i} must be the encrypted input {i} from circuit.encrypt, "
                                     f"got {x!r}")
            if x.circuit != self.digest:
                raise ParameterError(f"{self.name}: input {i} was encrypted for another circuit or other parameters")
            if batch is not None and x.batch_shape != batch:
                raise ParameterError(f"{self.name}: inputs of batch shapes {batch} and {x.batch_shape}")
            batch = x.batch_shape
            if key_id is not None and x.key_id != key_id:
                raise KeyMismatchError(f"{self.name}: inputs encrypted under different key pairs")
            key_id = x.key_id
        self.scheme.check_keys(self.graph, self.params, public, key_id)
        for i, (x, want) in enumerate(zip(inputs, self.scheme.input_shapes(self.graph, self.params, batch),
                                          strict=True)):
            got = [(tuple(np.shape(a)), np.dtype(getattr(a, "dtype", np.asarray(a).dtype))) for a in x.leaves]
            if got != [(tuple(sh), np.dtype(dt)) for sh, dt in want]:
                raise ParameterError(f"{self.name}: input {i} holds arrays {got}, the circuit takes {want}")
        leaves, treedef = self._runtime(public)
        with self.scheme.scope(self.params):
            program = self._program(batch, devices, leaves, treedef)
            outs = program((), tuple(tuple(x.leaves) for x in inputs), leaves)
        return [Encrypted(tuple(o), batch, key_id, self.digest, j, True) for j, o in enumerate(outs)]

    def encrypt_run_decrypt(self, *values):
        """decrypt(run(encrypt(values))) with the circuit's keys (made by :meth:`keygen` if there are none)."""
        if self.keys is None:
            self.keygen()
        return self.decrypt(*self.run(*self.encrypt(*values)))

    def _runtime(self, public):
        """The program's key, plan and constant arrays for ``public`` (made once per key set) and their structure."""
        cached = self.__dict__.get("_runtime_cache")
        if cached is not None and cached[0] is public:
            return cached[1], cached[2]
        with self.scheme.scope(self.params):
            tree = self.scheme.runtime(self.graph, self.params, public)
            leaves, treedef = jax.tree.flatten(tree)
            leaves = [jax.device_put(x) for x in leaves]
        expected = self.__dict__.get("_runtime_digest")
        if expected is not None and hashlib.sha256(str(treedef).encode()).hexdigest() != expected:
            raise ParameterError(f"{self.name}: these evaluation keys and constants are laid out differently from "
                                 "the ones the circuit was exported with (another dnum, key set or kernel set, or a "
                                 "crossfhe version that lays out the program's constants differently); export it "
                                 "again with these keys and this version")
        self.__dict__["_runtime_cache"] = (public, leaves, treedef)
        return leaves, treedef

    def _flat_fn(self, batch, treedef):
        """The program on flat arguments: (inputs: a tuple of leaf tuples, runtime leaves) -> output leaf tuples.
        Over a batch the items are vectorized (``vmap``), except where they run one after another inside the program
        (:func:`jax.lax.map`): where the graph is one the scheme runs operation by operation eagerly
        (:meth:`Scheme.by_operation`: a bootstrap; vectorized, XLA:CPU took 5 minutes to compile two N 2^11 items,
        benchmarks/README.md), and, compiled for a CPU, where the scheme materializes its kernels' results
        (:attr:`Scheme.materialize_kernels`: under ``vmap`` the materializing conditionals become selects, which
        materialize nothing). Compiled for another platform (a GPU, where the barriers are the identity) those items
        stay vectorized (:func:`jax.lax.platform_dependent`: one program, its branch chosen where it is lowered)."""
        graph, params, scheme = self.graph, self.params, self.scheme

        def item_of(items: int):
            def item(inputs, leaves):
                rt = jax.tree.unflatten(treedef, leaves)
                return tuple(tuple(o) for o in scheme.interpret(graph, params, inputs, rt, items=items))

            return xla.materializing(item) if scheme.materialize_kernels else item

        item = item_of(1)

        def mapped(inputs, leaves):
            flat = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[len(batch):]), inputs)
            out = jax.lax.map(lambda x: item(x, leaves), flat)
            return jax.tree.map(lambda a: a.reshape(tuple(batch) + a.shape[1:]), out)

        vectorized = item_of(math.prod(batch))
        for _ in batch:
            vectorized = jax.vmap(vectorized, in_axes=(0, None))
        if not batch:
            return item
        if scheme.by_operation(graph):
            return mapped
        if scheme.materialize_kernels:
            return lambda inputs, leaves: jax.lax.platform_dependent(inputs, leaves, cpu=mapped, default=vectorized)
        return vectorized

    def _traced(self, batch, leaves, treedef):
        """(constants, fn(constants, inputs, runtime leaves) -> outputs) for ``batch``: the program on flat
        arguments. Its tables are small (modulus and NTT tables, embedded; keys and per-node constants are runtime
        arguments), so ``constants`` is empty; the leading argument keeps exported programs' signature."""
        cached = self._lifted.get(batch)
        if cached is None:
            flat = self._flat_fn(batch, treedef)
            cached = self._lifted[batch] = ((), lambda consts, inputs, leaves: flat(inputs, leaves))
        return cached

    def _devices(self, batch, devices):
        devices = list(jax.local_devices() if devices is None else devices)
        if len(devices) > 1 and batch and batch[0] % len(devices) == 0:
            return tuple(devices)
        return tuple(devices[:1])

    def _program(self, batch, devices, leaves, treedef):
        devices = self._devices(batch, devices)
        key = (batch, tuple(str(d) for d in devices))
        if key in self._programs:
            return self._programs[key]
        t0 = time.perf_counter()
        exported, source = self._exported.get((batch, len(devices), _platform(devices[0]))), "loaded"
        if exported is None and self.cache and cache_dir() is not None:
            exported, source = self._load_exported(batch, devices, leaves), "cache"
            if exported is None:
                exported, source = self._export_to_cache(batch, devices, leaves, treedef), "exported"
        if exported is None:
            source = "traced"
        self.timings.setdefault("sources", []).append(source)
        fn = exported.call if exported is not None else self._traced(batch, leaves, treedef)[1]
        if len(devices) > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            mesh = Mesh(np.array(devices), ("batch",))
            shard, repl = NamedSharding(mesh, PartitionSpec("batch")), NamedSharding(mesh, PartitionSpec())
            jitted = jax.jit(fn, in_shardings=(repl, shard, repl), out_shardings=shard,
                             **_options())
        else:
            jitted = jax.jit(fn, **_options())
        self._programs[key] = jitted
        self.timings[key] = time.perf_counter() - t0
        return jitted

    # Export ----------------------------------------------------------------------------------------

    def _cache_key(self, batch, devices, leaves) -> str:
        kernels = self.scheme.kernels(self.params)
        shapes = [(tuple(np.shape(x)), str(np.asarray(x).dtype) if not hasattr(x, "dtype") else str(x.dtype))
                  for x in leaves]
        parts = [self.digest, repr(batch), str(len(devices)), _platform(devices[0]), _versions(),
                 getattr(kernels, "name", str(kernels)), self.scheme.build_id(self.params), repr(shapes)]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]

    def _abstract(self, batch, leaves):
        ins = self.scheme.input_shapes(self.graph, self.params, batch)
        ins = tuple(tuple(jax.ShapeDtypeStruct(tuple(s), d) for s, d in item) for item in ins)
        return ins, [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves]

    def _lower_exported(self, batch, leaves, treedef, platform: str):
        from jax import export

        checks = [export.DisabledSafetyCheck.custom_call(t) for t in self.scheme.custom_calls(self.params)]
        consts, run = self._traced(batch, leaves, treedef)
        shapes = tuple(jax.ShapeDtypeStruct(np.shape(c), c.dtype) for c in consts)
        with self.scheme.scope(self.params):
            return export.export(jax.jit(run), platforms=(platform,), disabled_checks=checks)(
                shapes, *self._abstract(batch, leaves))

    def _exported_for(self, batch, leaves, platform: str):
        """The program this circuit already holds for ``batch`` on ``platform`` (run through the cache, or loaded)
        whose arguments have the shapes and dtypes of ``leaves``' runtime (the circuit cache's own key: the graph
        fixes the runtime's structure), else None: what :meth:`export` writes without lowering again."""
        # the program's arguments: its constants (none, :meth:`_traced`), the inputs, the runtime leaves
        want = [(tuple(a.shape), str(a.dtype)) for a in jax.tree_util.tree_leaves(self._abstract(batch, leaves))]
        for (b, _, p), exp in self._exported.items():
            if b == batch and p == platform and [(tuple(a.shape), str(a.dtype)) for a in exp.in_avals] == want:
                return exp
        return None

    def _export_to_cache(self, batch, devices, leaves, treedef):
        root = cache_dir()
        runtime.enable_compilation_cache()
        try:
            exp = self._lower_exported(batch, leaves, treedef, _platform(devices[0]))
            blob = exp.serialize()
        except Exception as e:  # noqa: BLE001 - a circuit that cannot be exported still runs; the reason is kept
            self.timings["export_error"] = f"{type(e).__name__}: {e}"
            return None
        path = root / "circuits" / f"{self._cache_key(batch, devices, leaves)}.jaxexport"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_bytes(bytes(blob) + hashlib.sha256(bytes(blob)).digest())
        os.replace(tmp, path)
        self._exported[(batch, len(devices), _platform(devices[0]))] = exp
        return exp

    def _load_exported(self, batch, devices, leaves):
        root = cache_dir()
        path = root / "circuits" / f"{self._cache_key(batch, devices, leaves)}.jaxexport"
        if not path.exists():
            return None
        runtime.enable_compilation_cache()
        from jax import export

        data = path.read_bytes()
        try:
            if len(data) < 32 or hashlib.sha256(data[:-32]).digest() != data[-32:]:
                raise SerializationError("checksum")
            exp = export.deserialize(bytearray(data[:-32]))
        except Exception:  # noqa: BLE001 - a damaged cache entry is recompiled, never trusted
            path.unlink(missing_ok=True)
            return None
        self._exported[(batch, len(devices), _platform(devices[0]))] = exp
        return exp

    def export(self, path, *, batch_shape=(), keys=None, platform: str | None = None,
               model: dict | None = None) -> Path:
        """Write the circuit (its graph, parameters' digest, specs and the lowered program for ``batch_shape``) to
        ``path``; :func:`load` reads it in a server process without the function or a trace. ``keys``: evaluation
        keys to take the argument shapes from (default the circuit's own). ``platform``: where the server runs it
        ("cpu", "cuda", ...; default that of this process's first local device). ``model``: a JSON object stored
        with it (:mod:`crossfhe.ml`'s client side), given back by :func:`load` as ``circuit.model``. A program the
        circuit already holds for this batch shape, platform and key shapes (run through the circuit cache, or
        loaded) is written as it is, not lowered again."""
        batch = tuple(int(b) for b in batch_shape)
        public = self._key_material(keys, "export")
        self.scheme.check_keys(self.graph, self.params, public, None)  # keys that cannot run it: the user's error
        leaves, treedef = self._runtime(public)
        platform = platform or _platform(jax.local_devices()[0])
        exported = self._exported_for(batch, leaves, platform) or self._lower_exported(batch, leaves, treedef, platform)
        body = bytes(exported.serialize())
        header = {
            "scheme": self.scheme.name, "name": self.name, "digest": self.digest,
            "params": self.scheme.params_digest(self.params),
            "kernels": getattr(self.scheme.kernels(self.params), "name", "?"),
            "build": self.scheme.build_id(self.params), "batch_shape": list(batch), "versions": _versions(),
            "graph": self.scheme.graph_to_json(self.graph), "specs": [self.scheme.spec_to_json(s) for s in self.specs],
            "runtime": hashlib.sha256(str(treedef).encode()).hexdigest(),
            "runs": "one program", "parameters": _params_field(self.params),
        }
        if model is not None:
            header["model"] = model
        return circuit_file.write_circuit_file(path, header, body)


def _params_field(params) -> str:
    """The parameters' io blob, base64 (the exported header's ``parameters`` field)."""
    import base64

    from crossfhe import io

    return base64.b64encode(io.dumps(params)).decode("ascii")


def _params_from_header(header: dict, scheme: Scheme, source: str):
    """The parameters an exported header carries (its ``parameters`` field), checked against its digest."""
    import base64
    import binascii

    from crossfhe import io

    if "parameters" not in header:
        raise ParameterError(f"{source}: the file does not carry its parameters (exported by an older crossfhe); pass "
                             "them: load_circuit(path, params)")
    try:
        blob = base64.b64decode(header["parameters"], validate=True)
    except (binascii.Error, ValueError):
        raise SerializationError(f"{source}: the header's parameters are not base64") from None
    try:
        params = scheme.prepare_params(io.loads(blob))
    except SerializationError as e:
        raise SerializationError(f"{source}: the header's parameters: {e}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise SerializationError(f"{source}: the header's parameters are not {scheme.name}'s: {e}") from None
    if scheme.params_digest(params) != header["params"]:
        raise SerializationError(f"{source}: the header's parameters do not match their digest")
    return params


def from_header(header, params=None, *, source: str = "the exported circuit") -> Circuit:
    """The circuit an exported header describes (:func:`crossfhe.io.circuit_file.check_circuit_header`'s fields:
    its graph, specs and parameters), without its lowered program: what a client needs to make keys, encrypt and
    decrypt for a served circuit; run, it traces the graph. ``params``: the parameters it was compiled for (default:
    those the header carries). SerializationError for a malformed header, ParameterError for other parameters."""
    header = circuit_file.check_circuit_header(header)
    scheme = schemes().get(header.get("scheme"))
    if scheme is None:
        raise SerializationError(f"{source}: unknown scheme {header.get('scheme')!r}")
    params = _params_from_header(header, scheme, source) if params is None else scheme.prepare_params(params)
    if scheme.params_digest(params) != header["params"]:
        raise ParameterError(f"{source}: the circuit was compiled for other parameters (digest "
                             f"{header['params'][:12]}, given {scheme.params_digest(params)[:12]})")
    kernels = getattr(scheme.kernels(params), "name", "?")
    if kernels != header["kernels"] or scheme.build_id(params) != header["build"]:
        raise ParameterError(f"{source}: compiled for the {header['kernels']!r} kernel set (build "
                             f"{header['build'] or 'none'}); these parameters run on {kernels!r} (build "
                             f"{scheme.build_id(params) or 'none'}): export it again here, or pass params with "
                             "that kernel set")
    try:
        graph = scheme.graph_from_json(header["graph"])
        specs = tuple(scheme.spec_from_json(s) for s in header["specs"])
    except SerializationError:
        raise
    except Exception as e:  # noqa: BLE001 - any malformed graph or spec, in the user's terms
        raise SerializationError(f"{source}: the circuit's graph or input specs are malformed: {e}") from None
    circuit = Circuit(graph, params, specs, scheme, name=header["name"], cache=False)
    if circuit.digest != header["digest"]:
        raise SerializationError(f"{source}: the graph does not match its digest")
    circuit.__dict__["_runtime_digest"] = header["runtime"]
    circuit.model = header.get("model")  # a compiled model's client side (crossfhe.ml checks it)
    return circuit


def load(path, params=None) -> Circuit:
    """A circuit exported by :meth:`Circuit.export`, for ``params`` (the same parameters it was compiled for, else
    ParameterError; default: the parameters the file carries). Runs without the original function and without
    tracing; refuses evaluation keys that lack what it needs and values encrypted for another circuit."""
    from jax import export

    header, body = circuit_file.read_circuit_file(path)
    circuit = from_header(header, params, source=os.fspath(path))
    if body:
        try:
            exp = export.deserialize(bytearray(body))
        except Exception as e:  # noqa: BLE001 - a damaged program, in the user's terms
            raise SerializationError(f"{path}: the lowered program cannot be read: {type(e).__name__}: {e}") from None
        circuit._exported[(tuple(header["batch_shape"]), 1, exp.platforms[0])] = exp
    return circuit


def compile(fn, *specs, params=None, precision: float | None = None, bits: int | None = None, cache: bool = True,
            optimize: bool = True, name: str | None = None, keys=None) -> Circuit:  # noqa: A001 - as Concrete's
    """Trace ``fn`` over symbolic inputs described by ``specs`` (``CKKSVector(length)``, ``BFVVector(length)``,
    ``TFHEInt(bits)``; one scheme per circuit), optimize its graph and return a :class:`Circuit`.

    ``params``: the scheme's parameters; if omitted, the smallest secure preset that fits the circuit's depth and
    ``precision`` (CKKS: bits after the point) or ``bits`` (TFHE) is chosen. Errors (a depth the parameters do not
    have, rotations without keys, mixed schemes, TFHE overflow) are raised here, naming the operation and line.
    ``keys``: existing keys (CircuitKeys, or the scheme's evaluation keys) the circuit must run with: checked here
    (a rotation they hold no key for is an error naming its line) and kept as the circuit's. ``cache``: False
    keeps this circuit out of the cross-process cache (:func:`cache_dir`).
    """
    if not specs:
        raise ParameterError("compile takes at least one input spec (CKKSVector(n), BFVVector(n), TFHEInt(bits), "
                             "TFHEInteger(dtype))")
    kinds = {getattr(s, "scheme", None) for s in specs}
    if len(kinds) != 1 or None in kinds or "?" in kinds:
        raise CircuitError(f"compile: the input specs {specs} must all be of one scheme (CKKSVector, BFVVector, "
                           "TFHEInt or TFHEInteger); a circuit computes in one scheme")
    scheme = schemes()[kinds.pop()]
    trace = Trace(scheme.name, params)
    symbols = [scheme.trace_input(trace, i, s) for i, s in enumerate(specs)]
    result = fn(*symbols)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if not outs:
        raise CircuitError(f"compile: {getattr(fn, '__name__', 'fn')} returned no values")
    nodes = []
    for j, o in enumerate(outs):
        if not isinstance(o, Value):
            raise CircuitError(f"compile: output {j} of {getattr(fn, '__name__', 'fn')} is {type(o).__name__}, not an "
                               "encrypted value (return values computed from the inputs)")
        if o.trace is not trace:
            raise CircuitError(f"compile: output {j} comes from another circuit's trace")
        nodes.append(scheme.output_node(trace, o, j))
    traced = trace.builder.graph(trace.inputs, nodes)
    if params is None:
        params = scheme.select(traced, precision=precision, bits=bits)
    params = scheme.prepare_params(params)
    graph, report = traced, [("traced", scheme.cost(traced, params, annotated=False))]
    for pass_name, pass_fn in scheme.passes(optimize):
        graph = pass_fn(graph, params)
        report.append((pass_name, scheme.cost(graph, params, annotated=pass_name in scheme.annotated_after)))
    result = Circuit(graph, params, tuple(specs), scheme, traced=traced, report=report, cache=cache,
                     name=name or getattr(fn, "__name__", "circuit"))
    if keys is not None:
        public = keys.public if isinstance(keys, CircuitKeys) else keys
        try:
            scheme.check_keys(graph, params, public, None)
        except (ParameterError, KeyMismatchError, TypeError) as e:
            raise CircuitError(f"compile {result.name}: {e}") from None
        if isinstance(keys, CircuitKeys):
            result.keys = keys
        else:
            result.public_keys = keys
    if cache and cache_dir() is not None:
        runtime.enable_compilation_cache()  # before keygen, encryption and the program compile: all of them reuse it
    return result


def circuit(*specs, **options):
    """Decorator form of :func:`compile`: ``@circuit(CKKSVector(8), params=presets.N14_L7)``."""
    def wrap(fn):
        return compile(fn, *specs, **options)

    return wrap


def _register_io() -> None:
    from crossfhe.io.registry import register_kind, register_type

    register_type(Encrypted, Encrypted.KIND, lambda x, params: x.serialize())
    register_kind(Encrypted.KIND, lambda blob, params, context: Encrypted.load(blob), params=(object,))


_register_io()

__all__ = ["Circuit", "CircuitKeys", "Encrypted", "InputSpec", "RingScheme", "Scheme", "cache_dir", "circuit",
           "compile", "from_header", "load"]
