"""Undoing a rejected draft on a recurrent model by running only its recurrent layers again.

A verify pass writes every checked position into each recurrent layer's state (mlx-lm's
``ArraysCache``: Qwen3-Next and Qwen3.5's gated delta nets, Mamba, Nemotron-H, LFM2's short
convolutions), and such state cannot be cut. speculative_step restores it to what it was
before the pass and brings it forward over the kept positions. Running the whole model over
them again would repeat the attention layers, the MLPs and everything else for nothing: only the
recurrent state must change, and what each recurrent mixer was given at the kept positions is
already known from the verify pass. So while a verify pass runs, each mixer's call is recorded
(:class:`MixerTap`), and the undo calls just those mixers again, each over its own recorded
input cut to the kept positions, from the restored state. Their outputs are never used, so MLX
computes only what the new state needs.

Which modules are the mixers is found once per model, by building (not evaluating) one
forward pass and noting which calls receive a recurrent cache; their classes' ``__call__`` is
then wrapped, recording only on a thread that asked for it.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Any, Iterator

_local = threading.local()  # .calls: the list being recorded on this thread, or None
_finding = threading.Lock()  # one model's mixers found at a time (classes are patched meanwhile)
_WRAPPED = "_mlxctl_mixer_tap"


class MixerTap:
    """The recurrent mixers of one model, and the calls recorded during this thread's last
    verify pass."""

    def __init__(self, model: Any) -> None:
        with _finding:  # found and wrapped together: another model's search patches classes meanwhile
            self.classes = _mixer_classes(model)
            for cls in self.classes:
                _wrap(cls)
        self.calls: list[tuple[Any, tuple, dict]] = []

    @property
    def usable(self) -> bool:
        return bool(self.classes)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Record the mixers' calls made on this thread inside the block (a verify pass)."""
        self.calls = []
        _local.calls = self.calls
        try:
            yield
        except BaseException:
            self.calls = []  # a failed pass: nothing of it may be replayed (or kept alive)
            raise
        finally:
            _local.calls = None

    def replay(self, kept: list[int], written: int, restored: list[Any]) -> bool:
        """Call each recorded mixer again over the positions each row kept (``kept[i]`` of the
        ``written``), from the ``restored`` recurrent caches (put back by the caller). Where rows
        kept different counts, the mixers run over the longest, told each row's length as the
        model tells them in a batch whose rows end apart: the caches' ``lengths``
        (``ArraysCache.prepare``) and a mask of each row's real positions in the mixer's ``mask``
        argument. False, having called nothing, where the recorded calls do not bring exactly
        those caches forward or one cannot be cut that way (a mask over the positions already, an
        input of another length, no ``mask`` argument where one is needed): the caller then runs
        the whole model over the kept tokens. The record is cleared either way."""
        import mlx.core as mx

        calls, self.calls = self.calls, []
        most, ragged = max(kept), min(kept) != max(kept)
        mask = mx.arange(most)[None] < mx.array(kept)[:, None] if ragged else None
        cut, covered = [], []
        for module, args, kwargs in calls:
            if not args:
                return False
            first, rest = args[0], args[1:]
            others = [*rest, *kwargs.values()]
            if not isinstance(first, mx.array) or first.ndim < 2 or first.shape[1] != written \
                    or any(isinstance(a, mx.array) for a in others):
                return False
            covered += [a for a in others if _recurrent(a)]
            args, kwargs = (first[:, :most], *rest), dict(kwargs)
            if ragged and (args := _with_mask(module, args, kwargs, mask)) is None:
                return False
            cut.append((module, args, kwargs))
        if not cut or sorted(map(id, covered)) != sorted(map(id, restored)):
            return False
        for c in restored if ragged else ():
            c.prepare(lengths=kept)
        try:
            for module, args, kwargs in cut:
                module(*args, **kwargs)
        finally:
            for c in restored if ragged else ():
                c.finalize()
        return True

    def forget(self) -> None:
        self.calls = []


def _with_mask(module: Any, args: tuple, kwargs: dict, mask: Any) -> tuple | None:
    """``args`` with ``mask`` as the module's ``mask`` argument (in ``kwargs`` where it was
    passed by name or not at all); None where its call takes no such argument."""
    at = _mask_slot(type(module))
    if at is None:
        return None
    if "mask" in kwargs or at >= len(args):
        kwargs["mask"] = mask
        return args
    return (*args[:at], mask, *args[at + 1:])


@functools.cache
def _mask_slot(cls: type) -> int | None:
    """Where ``mask`` is among the positional arguments of ``cls``'s call (after ``self``), or
    None where it takes none (found once a class)."""
    import inspect

    call = cls.__call__
    names = list(inspect.signature(getattr(call, "__wrapped__", call)).parameters)[1:]
    return names.index("mask") if "mask" in names else None


def _recurrent(value: Any) -> bool:
    from mlx_lm.models.cache import ArraysCache

    return type(value) is ArraysCache


def _wrap(cls: type) -> None:
    """Wrap ``cls.__call__`` (once per class) to append each call to the recording thread's list."""
    original = cls.__call__
    if getattr(original, _WRAPPED, False):
        return

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls = getattr(_local, "calls", None)
        if calls is not None and any(_recurrent(a) for a in (*args, *kwargs.values())):
            calls.append((self, args, kwargs))
        return original(self, *args, **kwargs)

    setattr(call, _WRAPPED, True)
    call.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__call__ = call


def _mixer_classes(model: Any) -> list[type]:
    """The classes of the modules that one forward pass hands a recurrent cache (built, not
    evaluated): each layer's direct children are watched while it runs."""
    import mlx.nn as nn

    children = {type(m) for layer in getattr(model, "layers", []) for m in layer.children().values()
                if isinstance(m, nn.Module)}
    found: set[type] = set()
    try:
        _watch(model, children, found)
    except Exception:  # noqa: BLE001 - a model this probe cannot run replays the whole model instead
        return []
    return sorted(found, key=lambda c: c.__name__)


def _watch(model: Any, classes: set[type], found: set) -> None:
    """Build one forward pass with each of ``classes`` watched for a recurrent cache (the
    caller holds ``_finding``); each class is left as it was, its own ``__call__`` or none."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    originals = {cls: cls.__call__ for cls in classes}
    own = {cls: "__call__" in cls.__dict__ for cls in classes}

    def watcher(cls: type) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if any(_recurrent(a) for a in (*args, *kwargs.values())):
                found.add(cls)
            return originals[cls](self, *args, **kwargs)
        return call

    try:
        for cls in originals:
            cls.__call__ = watcher(cls)
        model(mx.array([[0, 1]]), cache=make_prompt_cache(model))  # graph only: nothing is evaluated
    finally:
        for cls, original in originals.items():
            if own[cls]:
                cls.__call__ = original
            else:  # inherited: set here only for the watch
                del cls.__call__
