"""What the three facades share about keys: the key-id check between operands, and the key owner a value remembers.

A value made by a key owner's context (:class:`~crossfhe.api.ckks.CKKSContext`, ``BFVContext``, ``TFHEContext``), or
computed from one, keeps that context in an attribute ``_owner`` so that ``x.decrypt()`` works where the key is.
Pickling drops the attribute (:meth:`KeyOwned.__getstate__`) and blobs never hold it, so a value that travelled
cannot decrypt itself: the secret key never rides along.
"""

from __future__ import annotations

import weakref

import numpy as np

from crossfhe.errors import KeyMismatchError, ParameterError

_SWITCHES: dict = {}


def register_switch(ckks_key_id: str | None, switch) -> None:
    """Remember ``switch`` (a :class:`~crossfhe.api.switch.SchemeSwitch`, weakly) as the one whose comparisons
    ``x > y`` on the CKKS key pair ``ckks_key_id``'s vectors go through."""
    _SWITCHES[ckks_key_id] = weakref.ref(switch)


def switch_for(ckks_key_id: str | None):
    """The :class:`~crossfhe.api.switch.SchemeSwitch` made in this process for the CKKS key pair ``ckks_key_id``
    (:func:`register_switch`), or None."""
    ref = _SWITCHES.get(ckks_key_id)
    return None if ref is None else ref()


def same_keys(what: str, mine: str | None, theirs: str | None) -> None:
    """Raise KeyMismatchError when two key ids are known and differ."""
    if mine is not None and theirs is not None and mine != theirs:
        raise KeyMismatchError(
            f"{what}: the operands come from different contexts (key ids {mine} and {theirs}): values encrypted "
            "under one context's keys cannot be combined with another's, nor decrypted by it"
        )


def set_owner(x, owner):
    """``x``, remembering the key owner's context that can decrypt it (None: no owner)."""
    if owner is not None:
        object.__setattr__(x, "_owner", owner)
    return x


class KeyOwned:
    """Mixin of the encrypted values: ``decrypt()`` through the remembered key owner, never pickled."""

    def _pair(self, other, what: str) -> None:
        """Refuse an operand of another scheme or trace (:meth:`crossfhe.api.trace.Value._same`), of another key pair,
        or (concrete values) of a batch shape that does not broadcast with this one's."""
        self._same(other, what)
        if self.traced:
            return
        same_keys(what, self.ct.key_id, other.ct.key_id)
        try:
            np.broadcast_shapes(self.shape, other.shape)
        except ValueError:
            raise ParameterError(f"{what}: batches of shapes {self.shape} and {other.shape} do not broadcast") from None

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_owner", None)  # the key owner's context never travels (it holds the secret key)
        return state

    def decrypt(self):
        """``ctx.decrypt(self)`` with the key owner's context that made this value, in this process. A value loaded
        from a blob, unpickled, or made from a public context has none: ParameterError."""
        owner = self.__dict__.get("_owner")
        if owner is None:
            raise ParameterError(
                f"this {type(self).__name__} has no key owner here (it was loaded, unpickled, or made from a public "
                "context): decrypt it with the key owner's context, ctx.decrypt(x)")
        return owner.decrypt(self)
