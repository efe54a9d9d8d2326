"""The models `serve` keeps in its resident pool: from repeated ``-m``, from ``--models-config``,
and (with ``--allow-unconfigured-models``) the ones requests name.

A models config is JSON, or YAML when PyYAML is installed (``.yaml`` / ``.yml``)::

    models:
      - name: fast                 # the id clients use (default: from the reference)
        ref: ./models/tiny-4bit    # what -m takes; ./ and ../ are relative to this file
        pin: true                  # never unloaded once loaded (like --pin)
        keep_alive: 10m            # this model's --keep-alive
        dtype: float16             # and, like the flags of the same names:
        load_format: auto          #   load_format, moe_top_k, max_num_seqs, prefill_chunk,
                                   #   prefill_step_ms, max_model_len
        temperature: 0.7           # sampling defaults for this model's requests that omit them:
        max_tokens: 2048           #   temperature, top_p, top_k, min_p, max_tokens
      - ref: org/other-model

Every bad entry is refused before anything loads, with one line naming the file, the entry and
the key.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlxctl.cli.serve_sampling import CONFIG_KEYS, config_sampling
from mlxctl.errors import BadInputError

_UNSET: Any = object()
KEYS = ("name", "ref", "pin", "keep_alive", "dtype", "load_format", "moe_top_k", "max_num_seqs", "prefill_chunk",
        "prefill_step_ms", "max_model_len", *CONFIG_KEYS)
_NAME = re.compile(r"[A-Za-z0-9._:/@-]+")
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+(?:@[\w./-]+)?$")
Factories = tuple[Callable[[], Any], Callable[[], int | None]]  # (make_engine, estimate) of a pool model


@dataclass(frozen=True)
class ModelSpec:
    """One pool model; ``None`` settings take the serve flags' values."""

    name: str
    ref: str
    pin: bool = False
    keep_alive_s: Any = _UNSET  # seconds, None for never; _UNSET: --keep-alive
    dtype: str | None = None
    load_format: str | None = None
    moe_top_k: int | None = None
    max_num_seqs: int | None = None
    prefill_chunk: int | None = None
    prefill_step_ms: int | None = None
    max_model_len: int | None = None
    sampling: Any = None  # api.sampling_defaults.SamplingDefaults of its sampling keys; None: none
    where: str = ""  # where it was given, for messages: "-m fast=..." or "FILE: models[1] (fast)"


@dataclass(frozen=True)
class EngineDefaults:
    """The serve flags a pool model's engine is built with unless its spec says otherwise."""

    dtype: str
    load_format: str
    moe_top_k: int | None
    config: Any  # engine.EngineConfig
    progress: Callable[[str], None] | None = None


def load_models_config(path: Path) -> list[ModelSpec]:
    """The models listed in ``path``, checked; BadInputError naming the entry and key otherwise."""
    file = path.expanduser()
    where = str(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInputError(f"--models-config {where}: no such file") from None
    except IsADirectoryError:
        raise BadInputError(f"--models-config {where}: a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"--models-config {where}: cannot read it: {exc}") from None
    data = _parse(text, where, yaml=file.suffix.lower() in (".yaml", ".yml"))
    if not isinstance(data, dict) or "models" not in data:
        raise BadInputError(f"{where}: the top level must be an object with a 'models' list")
    if unknown := sorted(set(data) - {"models"}):
        raise BadInputError(f"{where}: unknown top-level key '{unknown[0]}' (only 'models')")
    if not isinstance(data["models"], list):
        raise BadInputError(f"{where}: 'models' must be a list of models")
    base = file.resolve().parent
    return [_entry(item, f"{where}: models[{i}]", base) for i, item in enumerate(data["models"])]


def _parse(text: str, where: str, *, yaml: bool) -> Any:
    if not yaml:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    try:
        import yaml as pyyaml
    except ImportError:
        raise BadInputError(f"{where}: YAML needs PyYAML (pip install pyyaml); or write the file as JSON") from None
    try:
        return pyyaml.safe_load(text)
    except pyyaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise BadInputError(f"{where}: invalid YAML{at}: {problem}") from None


def _entry(item: Any, where: str, base: Path) -> ModelSpec:
    from mlxctl.cli.serve import default_name

    if isinstance(item, str):
        item = {"ref": item}
    if not isinstance(item, dict):
        raise BadInputError(f"{where}: an entry must be an object with 'ref' (or a reference string)")
    label = item.get("name") if isinstance(item.get("name"), str) else item.get("ref")
    where = f"{where} ({label})" if isinstance(label, str) and label.strip() else where
    if unknown := sorted(set(map(str, item)) - set(KEYS)):
        raise BadInputError(f"{where}: unknown key '{unknown[0]}'", hint=f"keys: {', '.join(KEYS)}")
    ref = _text(item, "ref", where, required=True)
    ref = _relative_to(base, ref)
    looks_local = ref.startswith(("/", "~")) or ref.lower().endswith(".gguf")
    if looks_local and not Path(ref).expanduser().exists():
        raise BadInputError(f"{where}: ref: no such file or folder: {ref}")
    name = _text(item, "name", where) or default_name(ref)
    if not _NAME.fullmatch(name):
        raise BadInputError(f"{where}: name: {name!r} may hold only letters, digits and . _ : / @ -")
    return ModelSpec(
        name=name, ref=ref, pin=_flag(item, "pin", where), keep_alive_s=_keep_alive(item, where),
        dtype=_choice(item, "dtype", where, _dtypes()), load_format=_choice(item, "load_format", where, _formats()),
        moe_top_k=_count(item, "moe_top_k", where, 1), max_num_seqs=_count(item, "max_num_seqs", where, 1),
        prefill_chunk=_count(item, "prefill_chunk", where, 0),
        prefill_step_ms=_count(item, "prefill_step_ms", where, 0), max_model_len=_count(item, "max_model_len", where, 1),
        sampling=config_sampling(item, where), where=where)


def _text(item: dict, key: str, where: str, *, required: bool = False) -> str | None:
    value = item.get(key)
    if value is None:
        if required:
            raise BadInputError(f"{where}: ref: missing (a catalog name, model folder, .gguf file or repo id)")
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadInputError(f"{where}: {key}: must be a non-empty string, got {value!r}")
    return value.strip()


def _relative_to(base: Path, ref: str) -> str:
    """./ and ../ references are relative to the config file's folder."""
    if ref.startswith(("./", "../")):
        return str((base / ref).resolve())
    return ref


def _flag(item: dict, key: str, where: str) -> bool:
    value = item.get(key, False)
    if not isinstance(value, bool):
        raise BadInputError(f"{where}: {key}: must be true or false, got {value!r}")
    return value


def _keep_alive(item: dict, where: str) -> Any:
    if "keep_alive" not in item:
        return _UNSET
    from mlxctl.server.residency import parse_keep_alive

    value = item["keep_alive"]
    if value is None:
        raise BadInputError(f"{where}: keep_alive: must be a duration like 300, \"5m\" or -1, got null")
    return parse_keep_alive(value, f"{where}: keep_alive")


def _choice(item: dict, key: str, where: str, choices: tuple[str, ...]) -> str | None:
    value = item.get(key)
    if value is not None and value not in choices:
        raise BadInputError(f"{where}: {key}: must be one of {', '.join(choices)}, got {value!r}")
    return value


def _count(item: dict, key: str, where: str, least: int) -> int | None:
    value = item.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
        raise BadInputError(f"{where}: {key}: must be a whole number of at least {least}, got {value!r}")
    return value


def _dtypes() -> tuple[str, ...]:
    from mlxctl.models.loader import DTYPES

    return DTYPES


def _formats() -> tuple[str, ...]:
    from mlxctl.generation import LOAD_FORMATS

    return tuple(LOAD_FORMATS)


def pool_specs(extras: list[tuple[str, str]], config: list[ModelSpec], pins: list[str] | None,
               primary: str) -> list[ModelSpec]:
    """The pool's models: ``-m NAME=REF`` after the first, then the config file's, with
    ``--pin``; a name served twice or a --pin naming no pool model is refused."""
    specs = [ModelSpec(name, ref, where=f"-m {name}={ref}") for name, ref in extras]
    seen = {primary: "the primary model (the first -m)", **{s.name: s.where for s in specs}}
    for spec in config:
        if spec.name in seen:
            raise BadInputError(f"{spec.where}: name: '{spec.name}' is already served by {seen[spec.name]}",
                                hint="give the entry another name")
        seen[spec.name] = spec.where
        specs.append(spec)
    names = {s.name for s in specs}
    if unknown := sorted(set(pins or ()) - names):
        raise BadInputError(f"--pin {unknown[0]}: not an extra model",
                            hint="pin the names given as -m NAME=MODEL after the first, or in --models-config")
    return [dataclasses.replace(s, pin=True) if s.name in (pins or ()) else s for s in specs]


def engine_factory(spec: ModelSpec, defaults: EngineDefaults) -> Factories:
    """(make_engine, estimate) for one configured pool model."""
    from mlxctl.generation import lazy_engine

    dtype, load_format, config = _settings(spec, defaults)
    top_k = spec.moe_top_k if spec.moe_top_k is not None else defaults.moe_top_k

    def make_engine() -> Any:
        return lazy_engine(spec.ref, dtype=dtype, progress=defaults.progress, config=config,
                           load_format=load_format, moe_top_k=top_k)

    def estimate() -> int | None:
        if load_format != "auto":  # random weights for a preset: nothing on disk to read
            return None
        from mlxctl.models.resolve import resolve_model

        return _estimate(resolve_model(spec.ref, progress=defaults.progress).path, dtype)

    return make_engine, estimate


def _settings(spec: ModelSpec, defaults: EngineDefaults) -> tuple[str, str, Any]:
    scheduler = defaults.config.scheduler
    seqs = spec.max_num_seqs or scheduler.max_num_seqs
    scheduler = dataclasses.replace(scheduler, max_num_seqs=seqs, max_prefilling=min(8, seqs),
                                    prefill_chunk=_given(spec.prefill_chunk, scheduler.prefill_chunk),
                                    prefill_step_ms=_given(spec.prefill_step_ms, scheduler.prefill_step_ms))
    # --memory-budget-gb's ledger is shared with the primary's engine; --max-loaded-gb caps weights apart
    cap = dict(max_model_len=spec.max_model_len, max_model_len_at_most=False) if spec.max_model_len else \
        dict(max_model_len_at_most=True)  # serve's --max-model-len, where the model's own context is longer
    return (spec.dtype or defaults.dtype, spec.load_format or defaults.load_format,
            dataclasses.replace(defaults.config, scheduler=scheduler, memory_pinned=spec.pin, **cap))


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _estimate(path: Path, dtype: str) -> int | None:
    from mlxctl.errors import ModelFormatError
    from mlxctl.models.inspect import loaded_weights_bytes

    try:
        return loaded_weights_bytes(path, dtype)
    except ModelFormatError:  # headers inspect cannot read; the load decides, the budget is kept after it
        return None


def unconfigured_models(defaults: EngineDefaults) -> Callable[[str], Factories]:
    """``serve --allow-unconfigured-models``: the pool's hook for a name no one configured.

    A request may name a catalog chat model or a Hugging Face repo id (``org/name[@revision]``),
    fetched into the store or the HF cache if missing and loaded with the serve flags (real
    weights even with --load-format dummy). Never a local path, even one that exists: a request
    must not choose files on the server's disk."""
    def admit(name: str) -> Factories:
        check_request_ref(name)
        resolved: list[Path] = []

        def path() -> Path:
            if not resolved:
                resolved.append(resolve_request_ref(name, defaults.progress))
            return resolved[0]

        def load() -> Any:
            from mlxctl.models.loader import load_model

            loaded = load_model(path(), dtype=defaults.dtype, name=name)
            if defaults.moe_top_k is not None:
                from mlxctl.models.moe import set_moe_top_k

                set_moe_top_k(loaded.model, defaults.moe_top_k, defaults.progress)
            return loaded

        def make_engine() -> Any:
            from mlxctl.engine.engine import Engine

            return Engine(load, dataclasses.replace(defaults.config, memory_pinned=False))

        return make_engine, lambda: _estimate(path(), defaults.dtype)

    return admit


def check_request_ref(name: str) -> None:
    """BadInputError saying why a request may not load ``name``; nothing when it may."""
    from mlxctl.models.catalog import catalog_entry

    if (entry := catalog_entry(name)) is not None:
        if entry.kind != "chat":
            raise BadInputError(f"catalog model {name} is a {entry.kind} model, not a chat model")
        return
    if name.startswith((".", "/", "~")) or name.lower().endswith(".gguf") or name.count("/") != 1 \
            or "\\" in name or ".." in name.partition("@")[0] or not _REPO_ID.match(name):
        raise BadInputError("a request may name a catalog chat model or a Hugging Face repo id (org/name), "
                            "never a path")


def resolve_request_ref(name: str, progress: Callable[[str], None] | None = None) -> Path:
    """The model folder of a name :func:`check_request_ref` let through: the catalog's (imported
    into the store if missing) or the repo's snapshot (from the HF cache, else downloaded).
    Unlike ``resolve_model``, a local folder that happens to have the name is never used."""
    from mlxctl.errors import ModelFormatError
    from mlxctl.models.catalog import catalog_entry
    from mlxctl.models.hub import hub_snapshot
    from mlxctl.models.resolve import resolve_model

    check_request_ref(name)
    if catalog_entry(name) is not None:
        return resolve_model(name, progress=progress).path
    repo_id, _, revision = name.partition("@")
    folder = hub_snapshot(repo_id, revision=revision or None, progress=progress)
    if not (folder / "config.json").is_file():
        raise ModelFormatError(f"Hugging Face repo {repo_id} has no config.json")
    return folder


def build_pool(specs: list[ModelSpec], budget_bytes: int, keep_alive_s: float | None, defaults: EngineDefaults,
               allow_unconfigured: bool = False) -> Any:
    """The resident pool (server.residency.ModelPool) of ``specs``, nothing loaded yet."""
    from mlxctl.server.residency import ModelPool

    pool = ModelPool(budget_bytes, keep_alive_s, unconfigured_models(defaults) if allow_unconfigured else None)
    pool.ledger = defaults.config.memory_ledger
    for spec in specs:
        make_engine, estimate = engine_factory(spec, defaults)
        keep = {} if spec.keep_alive_s is _UNSET else {"keep_alive_s": spec.keep_alive_s}
        pool.add(spec.name, spec.ref, make_engine, pinned=spec.pin, estimate=estimate, sampling=spec.sampling, **keep)
    return pool
