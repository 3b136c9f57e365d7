"""Reading JSON and JSONL files (plain or gzipped) with errors that name the file, line and field.

Every importer goes through these functions, so a truncated line or a wrong type is reported the
same way everywhere: ``DataError("data.jsonl:line 7: field 'criteria': expected a list ...")``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import zlib
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterator, Sequence, TypeVar

from usl.types import DataError

R = TypeVar("R")

# What a damaged or hostile file raises while it is read: a corrupt or cut gzip/xz stream, bytes
# that are not UTF-8.
_UNREADABLE = (OSError, UnicodeDecodeError, EOFError, lzma.LZMAError, zlib.error)

_TYPE_NAMES = {str: "a string", list: "a list", dict: "an object", int: "an integer",
               float: "a number", bool: "a boolean", type(None): "null"}


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (hex), read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def open_text(path: str | Path) -> io.TextIOBase:
    """Open a text file for reading, transparently decompressing ``*.gz`` and ``*.xz``."""
    p = Path(path)
    if not p.is_file():
        raise DataError("a folder, not a file" if p.is_dir() else "file not found", path=str(p))
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8")
    if p.suffix == ".xz":
        return io.TextIOWrapper(lzma.open(p, "rb"), encoding="utf-8")
    return open(p, encoding="utf-8")


def open_write(path: str | Path) -> io.TextIOBase:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".gz":
        # mtime=0 keeps the bytes reproducible for the same content.
        return io.TextIOWrapper(gzip.GzipFile(p, "wb", mtime=0), encoding="utf-8")
    return open(p, "w", encoding="utf-8")


def read_json(path: str | Path) -> Any:
    """Parse a whole JSON file; a syntax error reports the line it was found on."""
    try:
        with open_text(path) as f:
            text = f.read()
    except _UNREADABLE as e:
        raise DataError(f"cannot read file: {e}", path=str(path)) from e
    obj = _parse(text, str(path), None)
    if "\\ud" in text.lower():  # an escaped surrogate: valid JSON, but a lone one is no text
        _check_surrogates(obj, str(path), None)
    return obj


def _parse(text: str, path: str, line: int | None) -> Any:
    """``json.loads`` whose every failure is a ``DataError`` naming the file and line: bad syntax,
    nesting deeper than the parser's recursion limit, an integer of more digits than Python converts."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        kind = "invalid JSON" if line is None else "invalid JSON (truncated line?)"
        raise DataError(f"{kind}: {e.msg} (column {e.colno})", path=path, line=line or e.lineno) from e
    except RecursionError as e:
        raise DataError("JSON nested too deeply to read", path=path, line=line) from e
    except ValueError as e:        # "Exceeds the limit (4300 digits) for integer string conversion"
        raise DataError(f"a number that cannot be read: {str(e).split(';')[0]}", path=path, line=line) from e


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line; every line must be a JSON object."""
    try:
        with open_text(path) as f:
            for n, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                # without its newline: a line cut short is reported at its own end
                obj = _parse(raw.rstrip("\r\n"), str(path), n)
                if not isinstance(obj, dict):
                    raise DataError(f"expected a JSON object, got {_kind(obj)}", path=str(path), line=n)
                if "\\ud" in raw.lower():  # an escaped surrogate: valid JSON, but a lone one is no text
                    _check_surrogates(obj, str(path), n)
                yield n, obj
    except _UNREADABLE as e:
        raise DataError(f"cannot read file: {e}", path=str(path)) from e


def _check_surrogates(obj: object, path: str, line: int | None, where: str = "") -> None:
    """Raise ``DataError`` naming the field that holds a lone UTF-16 surrogate ("\\ud800")."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError as e:
            raise DataError(f"a lone UTF-16 surrogate ({obj[e.start]!r}) is not text", path=path, line=line,
                            field=where or None) from e
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check_surrogates(v, path, line, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_surrogates(v, path, line, f"{where}[{i}]")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


class Fields:
    """Typed access to one JSON object's fields, raising ``DataError`` with file/line/field.

    >>> Fields({"a": 1}, path="x.jsonl", line=3).string("a")
    Traceback (most recent call last):
    usl.types.DataError: x.jsonl:line 3: field 'a': expected a string, got an integer
    """

    def __init__(self, obj: dict, *, path: str | None, line: int | None, prefix: str = ""):
        self.obj, self.path, self.line, self.prefix = obj, path, line, prefix

    def error(self, field: str, message: str) -> DataError:
        return DataError(message, path=self.path, line=self.line, field=self.prefix + field)

    def has(self, field: str) -> bool:
        return field in self.obj and self.obj[field] is not None

    def get(self, field: str, kind: type | tuple[type, ...]) -> Any:
        if field not in self.obj:
            raise self.error(field, "missing field")
        value = self.obj[field]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # bool is an int subclass; an id of `true` is a mistake, not the number 1.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            want = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise self.error(field, f"expected {want}, got {_kind(value)}")
        return value

    def string(self, field: str, *, nonempty: bool = False) -> str:
        value = self.get(field, str)
        if nonempty and not value.strip():
            raise self.error(field, "must not be empty")
        return value

    def ident(self, field: str) -> str:
        """An id given as a string or an integer, returned as a string."""
        value = self.get(field, (str, int))
        if isinstance(value, str) and not value.strip():
            raise self.error(field, "must not be empty")
        return str(value)

    def string_list(self, field: str, *, nonempty: bool = True) -> tuple[str, ...]:
        values = self.get(field, list)
        if nonempty and not values:
            raise self.error(field, "must not be an empty list")
        out = []
        for i, v in enumerate(values):
            if not isinstance(v, str) or not v.strip():
                raise self.error(f"{field}[{i}]", f"expected a non-empty string, got {_kind(v)}"
                                 if not isinstance(v, str) else "must not be empty")
            out.append(v)
        return tuple(out)


def read_recipe(cls: type[R], path: str | Path, overrides: Sequence[str] = ()) -> R:
    """A recipe dataclass from the YAML file at ``path``, then ``key=value`` overrides (YAML values); a list
    is read as a tuple, and one string where the field holds a tuple as a tuple of it. An unknown key is an
    error that names the file and the recipe's fields."""
    import yaml

    raw = yaml.safe_load(Path(path).read_text()) or {}
    for item in overrides:
        key, _, value = item.partition("=")
        raw[key.strip()] = yaml.safe_load(value)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {unknown}; the recipe's fields: {sorted(known)}")
    tuples = {f.name for f in fields(cls) if isinstance(f.default, tuple)}
    return cls(**{k: tuple(v) if isinstance(v, list) else (v,) if k in tuples and isinstance(v, str) else v
                  for k, v in raw.items()})
