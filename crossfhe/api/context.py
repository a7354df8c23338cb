"""What the three schemes' contexts share (one vocabulary, ``docs/vocabulary.md``).

A scheme's **public context** (:class:`PublicContext`: ``CKKSPublicContext``, ``BFVPublicContext``,
``TFHEPublicContext``) holds the parameters and the evaluation keys (``keys``): public material only, what values
refer to and what an evaluator needs; it pickles and serializes. Its **context** (:class:`Context`: ``CKKSContext``,
...) is the key owner's: the ``public`` context and the ``secret_key``; it decrypts and refuses to be pickled
(:class:`~crossfhe.core.keys.SecretHolder`). A value made by a key owner's context remembers it in this process
only (:mod:`crossfhe.api._owner`), so ``x.decrypt()`` works there.
"""

from __future__ import annotations

from crossfhe import runtime
from crossfhe.api._owner import same_keys, set_owner
from crossfhe.core.keys import SecretHolder
from crossfhe.errors import InsecureParametersError, ParameterError
from crossfhe.progress import callback as progress_callback


def prepare_create(owner: str, params, params_type, *, insecure: bool, progress, presets: str):
    """The checks and settings every ``create`` starts with: ``params`` of ``params_type`` (TypeError), not marked
    insecure unless ``insecure`` (InsecureParametersError naming ``presets``, where the secure ones are), the
    persistent compilation cache on (:func:`crossfhe.runtime.enable_compilation_cache`). Returns the progress
    callback (:mod:`crossfhe.progress`)."""
    if not isinstance(params, params_type):
        raise TypeError(f"params must be {params_type.__module__.split('.')[1]}.Params, got {type(params).__name__}")
    marked = params.ring.insecure if hasattr(params, "ring") else params.insecure
    if marked and not insecure:
        raise InsecureParametersError(
            f"{params!r} is marked insecure (below the 128-bit bound): {owner}.create(params, insecure=True) to use it "
            f"anyway (tests only), or take a preset of {presets}")
    progress = progress_callback(progress)
    runtime.enable_compilation_cache()
    return progress


class PublicContext:
    """The public context's shared part (module docstring); subclasses are dataclasses with ``params`` and
    ``keys`` and name their key owner's class in ``OWNER``."""

    OWNER = "?"

    def _settle(self) -> None:
        """The kernel set chosen here, once (AUTO resolved: :mod:`crossfhe.kernels`); keys made for the same
        parameters on another kernel set serve this one (ParameterError for keys of other parameters)."""
        import dataclasses

        if self.params.kernels.name == "auto":
            object.__setattr__(self, "params", self.params.with_kernels(self.params.kernels.resolve()))
        if self.keys.params != self.params:
            if self.keys.params.digest() != self.params.digest():
                raise ParameterError("the evaluation keys were made for other parameters than params")
            object.__setattr__(self, "keys", dataclasses.replace(self.keys, params=self.params))

    def _rotations(self, period: int) -> list[int]:
        """The rotations r in [1, ``period``) whose Galois keys (5^r mod 2N) the keys hold."""
        out, element, two_n = [], 1, 2 * self.params.n
        for r in range(1, period):
            element = element * 5 % two_n
            if element in self.keys.galois:
                out.append(r)
        return out

    @property
    def key_id(self) -> str | None:
        """The key pair's identifier (:func:`crossfhe.core.keys.key_id`)."""
        return self.keys.key_id

    def decrypt(self, x):
        raise ParameterError(
            f"a public context holds no secret key and cannot decrypt: decrypt with the {self.OWNER} that made the "
            "keys (ctx.decrypt(x)), on the key owner's side")


class Context(SecretHolder):
    """The key owner's context's shared part (module docstring); subclasses are dataclasses with ``public`` (of
    ``PUBLIC``) and ``secret_key`` (of ``SECRET``), and their values are of ``VALUE``."""

    PUBLIC: type = object
    SECRET: type = object
    VALUE: type = object

    def __post_init__(self):
        if not isinstance(self.public, self.PUBLIC):
            raise TypeError(f"public must be a {self.PUBLIC.__name__}, got {type(self.public).__name__}")
        if not isinstance(self.secret_key, self.SECRET):
            raise TypeError(f"secret_key must be a {self.SECRET.__name__}, got {type(self.secret_key).__name__}")
        same_keys(type(self).__name__, self.public.key_id, self.secret_key.key_id)

    @property
    def params(self):
        return self.public.params

    @property
    def keys(self):
        """The evaluation keys, as ``ctx.public.keys``."""
        return self.public.keys

    @property
    def key_id(self) -> str | None:
        return self.public.key_id

    def encrypt(self, values, **options):
        """The public context's ``encrypt``; the value (and what is computed from it) can then decrypt itself in this
        process (``x.decrypt()``)."""
        return set_owner(self.public.encrypt(values, **options), self)

    def _own(self, x, what: str):
        """``x``, checked to be a concrete value of this context's scheme and key pair."""
        if not isinstance(x, self.VALUE) or x.traced:
            raise TypeError(f"{what} takes an {self.VALUE.__name__}, got {x!r}")
        same_keys(what, self.key_id, x.ct.key_id)
        return x

    def __repr__(self) -> str:
        return f"{type(self).__name__}(with secret key, {self.public!r})"


__all__ = ["Context", "PublicContext", "prepare_create"]
