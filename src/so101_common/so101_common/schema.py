"""One way to read every file format: parse, validate against a pydantic model, fail in one line.

Every file the workspace reads (gap profiles, YAML configs, model metadata, dataset and bag
metadata) is described by a pydantic model derived from :class:`StrictModel` (or, for a record the
program mutates in a hot loop, a pydantic dataclass with :data:`STRICT_DATACLASS`) and read through
:func:`load_yaml` / :func:`load_json` (or :func:`validate` for a record already in memory, e.g. JSON
embedded in a model file). Whatever is wrong, the user gets one :class:`SchemaError` line that names
the file and the key::

    config/gap_profiles/my_arm.yaml: joints.elbow_flex.backlash: Input should be less than or equal to 0.5 (got 0.7)
    config/gap_profiles/my_arm.yaml:12:3: YAML syntax error: mapping values are not allowed here
    model.onnx [so101_gaponet metadata]: rate_hz: Field required
"""

from __future__ import annotations

import difflib
import json
import re
import typing
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, TypeAdapter, ValidationError

__all__ = ["SchemaError", "StrictModel", "YamlLoader", "STRICT_DATACLASS", "Number", "read_yaml", "read_json", "validate", "load_yaml", "load_json"]

ModelT = TypeVar("ModelT")


class SchemaError(ValueError):
    """A file or record does not fit its format; ``str()`` is one line naming the source and the key."""

    def __init__(self, source: str, message: str, key: str | None = None) -> None:
        self.source = source
        self.key = key
        self.message = message
        super().__init__(f"{source}: {key}: {message}" if key else f"{source}: {message}")


class StrictModel(BaseModel):
    """Base of every file schema: unknown keys, NaN and infinities are errors; parsed records are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


STRICT_DATACLASS = ConfigDict(extra="forbid", allow_inf_nan=False)
"""``pydantic.dataclasses.dataclass(config=STRICT_DATACLASS)``: the :class:`StrictModel` rules for a
mutable record whose attributes are assigned often (plain dataclass speed, validated when read)."""


def _number_not_bool_or_text(value: Any) -> Any:
    if isinstance(value, bool | str):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    return value


Number = Annotated[float, BeforeValidator(_number_not_bool_or_text)]
"""A float field that takes ints and floats but not ``true`` or ``"3"`` (pydantic's lax mode would)."""


class YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml when available) reading floats as YAML 1.2 does.

    PyYAML resolves plain scalars by YAML 1.1, whose float pattern needs a dot: ``5e-1`` or ``1e3``
    would be the strings "5e-1" and "1e3", and a number field would refuse them. YAML 1.2 (and every
    JSON parser) reads them as numbers; so does every file read here."""


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def read_yaml(path: str | Path) -> Any:
    """The YAML document in ``path``; a syntax error is one line ``file:line:col: message``."""
    text = _read_text(path)
    try:
        return yaml.load(text, Loader=YamlLoader)  # a safe loader: YamlLoader derives from SafeLoader
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = err.problem or err.context or "invalid YAML"
        raise SchemaError(where, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as err:
        raise SchemaError(str(path), f"YAML error: {' '.join(str(err).split())}") from None


def read_json(path: str | Path) -> Any:
    """The JSON document in ``path``; a syntax error is one line ``file:line:col: message``."""
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SchemaError(f"{path}:{err.lineno}:{err.colno}", f"JSON syntax error: {err.msg}") from None


def validate(model: type[ModelT], data: Any, source: str) -> ModelT:
    """``data`` as an instance of ``model`` (a pydantic model or dataclass); the first problem becomes a
    :class:`SchemaError` naming its key."""
    try:
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model.model_validate(data)
        return TypeAdapter(model).validate_python(data)
    except ValidationError as err:
        raise _schema_error(model, err, source) from None


def load_yaml(path: str | Path, model: type[ModelT]) -> ModelT:
    """Read and validate a YAML file (an empty file is validated as an empty mapping)."""
    data = read_yaml(path)
    return validate(model, {} if data is None else data, str(path))


def load_json(path: str | Path, model: type[ModelT]) -> ModelT:
    """Read and validate a JSON file."""
    return validate(model, read_json(path), str(path))


# ------------------------------------------------------------------------------------- internals
def _read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaError(str(path), "no such file") from None
    except UnicodeDecodeError as err:
        raise SchemaError(str(path), f"not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise SchemaError(str(path), f"cannot read: {err.strerror or err}") from None


def _schema_error(model: type[Any], err: ValidationError, source: str) -> SchemaError:
    first = err.errors(include_url=False)[0]
    loc = tuple(first["loc"])
    key = ".".join(str(part) for part in loc) or None
    message = str(first["msg"])
    if first["type"] in ("extra_forbidden", "unexpected_keyword_argument") and loc:
        known = _field_names_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        message = f"unknown key{f' (did you mean {close[0]!r}?)' if close else ''}; known keys: {', '.join(known)}"
    elif first["type"] not in ("missing",) and "input" in first:
        message += f" (got {first['input']!r:.60})"
    if err.error_count() > 1:
        message += f" (and {err.error_count() - 1} more)"
    return SchemaError(source, message, key)


def _fields(cls: Any) -> dict[str, Any] | None:
    """Field name → annotation of a pydantic model or pydantic dataclass; None for anything else."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return {name: field.annotation for name, field in cls.model_fields.items()}
    fields = getattr(cls, "__pydantic_fields__", None) if isinstance(cls, type) else None
    return {name: field.annotation for name, field in fields.items()} if fields is not None else None


def _field_names_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """Field names of the (nested) model reached by ``loc``; [] where the path leaves pydantic models."""
    current: Any = model
    for part in loc:
        fields = _fields(current)
        if fields is not None:
            if str(part) not in fields:
                return []
            current = fields[str(part)]
        else:  # a container: dict[str, Model], list[Model], Optional[Model] ...
            args = [a for a in typing.get_args(current) if _fields(a) is not None]
            if not args:
                return []
            current = args[0]
    while _fields(current) is None:
        args = [a for a in typing.get_args(current) if _fields(a) is not None]
        if not args:
            return []
        current = args[0]
    return sorted(_fields(current) or {})
