"""Progress of long work (key generation, bootstrapping keys, blind rotations in chunks): one callback shape.

Every function of the library that can take more than about two seconds accepts ``progress``:

- a callable ``progress(done, total, what)``: ``done`` of ``total`` steps of the stage named ``what`` are finished
  (called after each step, ``done`` rising to ``total`` within a stage; a function may run several stages);
- ``None`` or ``False``: silent (the default of the scheme-level functions, ``crossfhe.ckks.ops.keygen`` and the
  like);
- ``True``: a progress bar per stage on standard error (``tqdm``; in a notebook its widget);
- ``"auto"`` (the default of the contexts, ``CKKSContext.create`` and the like): the same bars, each shown only
  once its stage has run for :data:`AUTO_DELAY_S` seconds, so quick work prints nothing.

:func:`callback` turns any of these into a plain callable (or None); library code calls :func:`report` on it.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int, str], None]
"""``progress(done, total, what)``."""

AUTO_DELAY_S = 2.0
"""How long a stage runs before ``progress="auto"`` shows its bar."""


class Bars:
    """A :data:`Progress` callback drawing one ``tqdm`` bar per stage (``tqdm.auto``: a widget in notebooks, text on
    a terminal), shown after ``delay`` seconds of a stage. A new ``what`` closes the previous bar."""

    def __init__(self, *, delay: float = 0.0, leave: bool = True):
        self.delay, self.leave = float(delay), leave
        self._bar = None
        self._what: str | None = None

    def __call__(self, done: int, total: int, what: str) -> None:
        from tqdm.auto import tqdm

        if what != self._what or self._bar is None or done < self._bar.n:
            self.close()
            self._bar = tqdm(total=total, desc=what, delay=self.delay, leave=self.leave, unit="step")
            self._what = what
        self._bar.total = total
        self._bar.update(done - self._bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar, self._what = None, None


def callback(progress) -> Progress | None:
    """The callable behind a ``progress`` argument (module docstring), or None for silence. Raises TypeError
    naming the accepted forms for anything else."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return Bars()
    if isinstance(progress, str) and progress == "auto":
        return Bars(delay=AUTO_DELAY_S, leave=False)
    if callable(progress):
        return progress
    raise TypeError(
        f"progress must be a callable progress(done, total, what), True (bars), 'auto' (bars after "
        f"{AUTO_DELAY_S:g} s) or None/False (silent), got {progress!r}"
    )


def report(progress: Progress | None, done: int, total: int, what: str) -> None:
    """Call ``progress(done, total, what)`` if there is a callback."""
    if progress is not None:
        progress(int(done), int(total), what)
