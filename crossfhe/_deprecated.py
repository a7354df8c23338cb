"""Old names kept for one release: each warns (:class:`DeprecationWarning`) naming its replacement, then does what the
new name does. The vocabulary they point to is the one of ``docs/vocabulary.md``."""

from __future__ import annotations

import functools
import warnings


def warn(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (removed in the next release)."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}", DeprecationWarning,
                  stacklevel=stacklevel)


def renamed(fn, old: str, new: str):
    """``fn`` under its old name ``old``: the same call, with a DeprecationWarning naming ``new``."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        warn(old, new)
        return fn(*args, **kwargs)

    call.__name__ = old.rsplit(".", 1)[-1]
    call.__doc__ = f"Deprecated: {new}."
    return call


def alias(attribute: str, old: str, new: str) -> property:
    """A read-only property ``old`` that returns ``self.<attribute>`` with a DeprecationWarning naming ``new``."""

    def get(self):
        warn(old, new)
        return getattr(self, attribute)

    return property(get, doc=f"Deprecated: {new}.")


def module_names(module: str, names: dict):
    """A module ``__getattr__`` serving old names: ``names`` maps each old name to (the object, its new name); reading
    one warns. Unknown names raise AttributeError as a module's would."""

    def get(name: str):
        if name in names:
            obj, new = names[name]
            warn(f"{module}.{name}", f"{module}.{new}")
            return obj
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return get


__all__ = ["alias", "module_names", "renamed", "warn"]
