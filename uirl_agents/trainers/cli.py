"""Configs from YAML and the command line; the field table of docs/training.md.

``load_config(GRPOConfig, "run.yaml", {"optim.learning_rate": "1e-4"})`` reads the file,
applies dotted overrides (values read as YAML) and builds the dataclasses, whose
``__post_init__`` runs the cross-field checks. :func:`parse_args` adds one
``--section.field VALUE`` option per config field, with the field's help text.

>>> from uirl_agents.trainers.config import GRPOConfig
>>> cfg = load_config(GRPOConfig, None, {"optim.learning_rate": "1e-4", "model.lora_rank": "8"})
>>> cfg.optim.learning_rate, cfg.model.lora_rank
(0.0001, 8)
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import logging
import types
import typing
from dataclasses import MISSING
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import yaml

from uirl_agents.trainers.config import ConfigT, GRPOConfig, PPOConfig, RSConfig, TrainConfig
from uirl_agents.trainers.metrics import MetricsBackendMissingError, check_backends

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: Any, tp: Any, name: str) -> Any:
    """``value`` checked against the annotation ``tp`` (ints widen to floats).

    Raises:
        ValueError: the value does not fit the annotation.
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, name)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[0])
    if origin is Literal:
        if value not in args:
            close = difflib.get_close_matches(str(value), [str(a) for a in args], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{name}: expected one of {list(args)}, got {value!r}{hint}")
        return value
    if origin is list:
        if isinstance(value, str):  # the command line's "a,b,c"
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list | tuple):
            raise ValueError(f"{name}: expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{name}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{name}: expected a mapping, got {value!r}")
        return dict(value)
    return _coerce_scalar(value, tp, name)


def _coerce_scalar(value: Any, tp: Any, name: str) -> Any:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if tp is bool and isinstance(value, bool):
        return value
    if tp is int and is_number and float(value).is_integer():
        return int(value)
    if tp is float and is_number:
        return float(value)
    if tp is str and (isinstance(value, str) or is_number):
        return str(value)  # e.g. a numeric run name
    raise ValueError(f"{name}: expected {getattr(tp, '__name__', tp)}, got {value!r}")


# Fields that moved, with what to write instead: an old config fails with the fix.
MOVED_FIELDS = {
    f"env.{name}": (
        f"SimpleDataEntry's {name!r} is a task option now, like any task's: set "
        f"env.task_options: {{simple_data_entry: {{{name}: ...}}}} (e.g. env.rows: [2] -> "
        "env.task_options: {simple_data_entry: {rows: [2]}}; docs/tasks/simple_data_entry.md)"
    )
    for name in ("rows", "num_rows", "row_pool")
}


def _build(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if f"{prefix}{key}" in MOVED_FIELDS:
            raise ValueError(f"config field '{prefix}{key}' moved: {MOVED_FIELDS[prefix + key]}")
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else ""
            raise ValueError(f"Unknown config field '{prefix}{key}'{hint} (known: {names})")
        tp = hints[key]
        if _is_section(tp):
            if not isinstance(value, dict):
                raise ValueError(f"{prefix}{key}: expected a mapping of fields, got {value!r}")
            kwargs[key] = _build(tp, value, f"{prefix}{key}.")
        else:
            kwargs[key] = _coerce(value, tp, f"{prefix}{key}")
    return cls(**kwargs)


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"{dotted}: {part!r} is a field, not a section")
    node[leaf] = value


def parse_value(text: str) -> Any:
    """A command-line value read as YAML: ``1e-4`` -> float, ``[1, 2]`` -> list, ``null`` -> None."""
    value = yaml.safe_load(text)
    # YAML 1.1 reads "1e-4" (no dot) as a string; a number is meant.
    if isinstance(value, str):
        try:
            return float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            return value
    return value


def read_config_file(path: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A YAML config's sections; a ``base: FILE`` key (relative to this file) is read
    first and this file's fields override it, field by field.

    Raises:
        ValueError: not a mapping, or a ``base`` chain that loops.
    """
    if path.resolve() in _seen:
        raise ValueError(f"{path}: its base chain loops back to itself")
    loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a mapping of config sections")
    data = dict(loaded)
    base = data.pop("base", None)
    if base is None:
        return data
    merged = read_config_file(path.parent / base, (*_seen, path.resolve()))
    for section, fields in data.items():
        if isinstance(fields, dict) and isinstance(merged.get(section), dict):
            merged[section] = {**merged[section], **fields}
        else:
            merged[section] = fields
    return merged


def load_config(
    cls: type[T], path: str | Path | None, overrides: dict[str, Any] | None = None
) -> T:
    """Build ``cls`` from a YAML file and dotted overrides (strings are read as YAML).

    Args:
        cls: :class:`RSConfig`, :class:`GRPOConfig` or :class:`PPOConfig`.
        path: a YAML file (None: defaults only); see :func:`read_config_file`.
        overrides: ``{"optim.learning_rate": "1e-4", ...}``, applied after the file.

    Raises:
        ValueError: unknown field (with the closest name), a value of the wrong type, or
            a failed cross-field check (the message says what to set).
    """
    data = read_config_file(Path(path)) if path is not None else {}
    for section in getattr(cls, "ignored_sections", ()):
        if data.pop(section, None) is not None:
            logger.debug("config section %r is for the other trainer; ignored", section)
    for dotted, value in (overrides or {}).items():
        section = dotted.split(".")[0]
        if section in getattr(cls, "ignored_sections", ()):
            continue
        _set_dotted(data, dotted, parse_value(value) if isinstance(value, str) else value)
    return _build(cls, data)


def config_to_dict(config: Any) -> dict[str, Any]:
    """The config as plain data, secrets (fields with ``metadata["secret"]``, e.g. the
    proxy's token) left out: it is logged, saved with the run and sent to W&B and the Hub."""
    data = dataclasses.asdict(config)
    _drop_secrets(type(config), data)
    return data


def _drop_secrets(cls: type, data: dict[str, Any]) -> None:
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("secret"):
            data[f.name] = None
        elif _is_section(hints[f.name]) and isinstance(data.get(f.name), dict):
            _drop_secrets(hints[f.name], data[f.name])


def save_config(config: Any, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False), "utf-8")


def iter_fields(cls: type, prefix: str = "") -> typing.Iterator[tuple[str, Any, Any, str]]:
    """``(dotted name, type, default, help)`` of every leaf field, in declaration order."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if _is_section(tp):
            yield from iter_fields(tp, f"{prefix}{f.name}.")
            continue
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: a config field needs a default")
        yield f"{prefix}{f.name}", tp, default, f.metadata["help"]


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _argparse_text(text: str) -> str:
    """``text`` made safe as an argparse help string: argparse %-formats help strings
    (for ``%(default)s``), so a literal ``%`` ("~30% slower") must be doubled.

    >>> _argparse_text("~30% slower")
    '~30%% slower'
    """
    return text.replace("%", "%%")


def build_arg_parser(cls: type, description: str) -> argparse.ArgumentParser:
    """``--config``, ``--output-dir``, ``--push-to-hub`` and one ``--section.field`` option
    per config field."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=None, help="YAML config file.")
    parser.add_argument("--output-dir", type=Path, required=True, help="Run folder (resumed).")
    parser.add_argument(
        "--push-to-hub",
        dest="override:hub.repo_id",
        metavar="REPO",
        default=argparse.SUPPRESS,
        help="When the run ends, push its result to this Hub repo (same as --hub.repo_id).",
    )
    group = parser.add_argument_group("config fields (override the YAML; values read as YAML)")
    add_field_options(group, cls)
    return parser


def add_field_options(group: Any, cls: type, prefix: str = "") -> None:
    """One ``--{prefix}field VALUE`` option per leaf field of ``cls`` (dest
    ``override:{prefix}field``, absent unless given): :func:`field_overrides` reads them."""
    for name, tp, default, help_text in iter_fields(cls, prefix):
        group.add_argument(
            f"--{name}",
            dest=f"override:{name}",
            default=argparse.SUPPRESS,
            metavar=_type_name(tp).upper().replace(" ", ""),
            help=_argparse_text(f"{help_text} [default: {default!r}]"),
        )


def field_overrides(args: argparse.Namespace, prefix: str = "") -> dict[str, Any]:
    """``{"section.field": value}`` of the ``--{prefix}...`` options given, ``prefix`` removed."""
    return {
        key.removeprefix("override:").removeprefix(prefix): value
        for key, value in vars(args).items()
        if key.startswith(f"override:{prefix}")
    }


def parse_args(
    cls: type[ConfigT], argv: list[str] | None, description: str
) -> tuple[ConfigT, Path]:
    """Parse ``--config FILE --output-dir DIR [--section.field VALUE ...]``.

    Raises:
        SystemExit: bad arguments (argparse), a config error, or a metric sink in
            ``logging.report_to`` that is not installed (its message is printed).
    """
    parser = build_arg_parser(cls, description)
    args = parser.parse_args(argv)
    try:
        config = load_config(cls, args.config, field_overrides(args))
        # Before any work: a run that cannot log its metrics must not start at all.
        check_backends(config.logging.report_to)
    except (ValueError, MetricsBackendMissingError) as exc:
        parser.error(str(exc))
    return config, args.output_dir


def config_markdown(cls: type) -> str:
    """The field table of docs/training.md, from the fields' help metadata."""
    lines = ["| Field | Type | Default | Help |", "|---|---|---|---|"]
    for name, tp, default, help_text in iter_fields(cls):
        cells = [f"`{name}`", f"`{_type_name(tp)}`", f"`{default!r}`", help_text]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    """Print the config tables (``python -m uirl_agents.trainers.cli``)."""
    print("### Shared fields (every trainer)\n")  # noqa: T201
    shared = {n for n, *_ in iter_fields(TrainConfig)}
    print(config_markdown(TrainConfig))  # noqa: T201
    # GRPOConfig's ppo section is the deprecated algorithm: ppo's: PPOConfig's table has it.
    for cls, section, elsewhere in (
        (RSConfig, "rs", ()),
        (GRPOConfig, "grpo", ("ppo.",)),
        (PPOConfig, "ppo", ()),
    ):
        print(f"\n### `{section}` ({cls.__name__} only)\n")  # noqa: T201
        rows = [
            r
            for r in config_markdown(cls).splitlines()[2:]
            if r.split("`")[1] not in shared and not r.split("`")[1].startswith(elsewhere)
        ]
        print("\n".join(config_markdown(cls).splitlines()[:2] + rows))  # noqa: T201


if __name__ == "__main__":
    main()
