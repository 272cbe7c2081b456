"""The format of the `print` operation: its text, with `{}` or `{:spec}` where each value
goes (`{{` and `}}` for braces), `spec` a format specification of Python's mini-language
(`.3f`, `>8`, `+08.2e`, `x` ...), and what C's `printf` writes for it.

The frontend makes this format from `kk.print`'s arguments (f-strings, printf-style `%`
formatting, values) and checks each specification here, so that one printf cannot write
(centring, a fill character, digit grouping, binary) is an error at the source line; the
targets' printf (`kernelkit.compiler.printf`) asks here what to write. It knows no LLVM."""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import types as T

_SPEC = re.compile(r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<z>z)?(?P<alternate>#)?"
                   r"(?P<zero>0)?(?P<width>\d+)?(?P<grouping>[,_])?(?:\.(?P<precision>\d+))?"
                   r"(?P<type>[bcdeEfFgGnosxX%])?")
_FIELD = re.compile(r"\{\{|\}\}|\{(?::(?P<spec>[^{}]*))?\}")
_FLOAT_TYPES, _INTEGER_TYPES = "eEfFgG", "cdnoxX"


class FormatError(ValueError):
    """A format specification printf cannot write; the message says which part."""


@dataclass(frozen=True, slots=True)
class Conversion:
    """A printf conversion (`%08.3f`) and how the value is passed: as a 'double', an
    'int64', a 'uint64', or a bool as the 'string' True or False."""

    text: str
    passed_as: str


def fields(text: str) -> list[tuple[str, str | None]]:
    """The format's pieces in order: (literal text, None) and ('', spec) for each value
    (spec '' for `{}`)."""
    pieces, position = [], 0
    for match in _FIELD.finditer(text):
        if match.start() > position:
            pieces.append((text[position:match.start()], None))
        token = match.group(0)
        if token in ("{{", "}}"):
            pieces.append((token[0], None))
        else:
            pieces.append(("", match.group("spec") or ""))
        position = match.end()
    if position < len(text):
        pieces.append((text[position:], None))
    return pieces


def conversion(spec: str, value_type: T.ScalarType) -> Conversion:
    """What printf writes for a value of `value_type` formatted with `spec`, as Python's
    `format(value, spec)` would (NumPy scalars' formatting: a float's `{}` is `%g`)."""
    if value_type.is_bool and not spec:
        return Conversion("%s", "string")
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise FormatError(f"'{spec}' is not a format specification")
    part = match.groupdict()
    for name, what in (("grouping", "digit grouping"), ("z", "'z'")):
        if part[name]:
            raise FormatError(f"'{spec}': printf has no {what}")
    if part["align"] == "^" or part["fill"] not in (None, " "):
        raise FormatError(f"'{spec}': printf pads with spaces (or zeros, '0'), to the left or "
                          f"right ('<'), and does not centre")
    kind = part["type"]
    is_float = value_type.is_float
    if kind is None:
        kind = "g" if is_float else "d"
    if kind in ("b", "%") or kind == "o" and part["alternate"]:
        raise FormatError(f"'{spec}': printf has no '{'#o' if kind == 'o' else kind}' "
                          f"conversion")
    if is_float and kind in _INTEGER_TYPES:
        raise FormatError(f"'{spec}': the '{kind}' format is for integers, this is a "
                          f"{value_type.name}")
    if kind in _INTEGER_TYPES and part["precision"] is not None:
        raise FormatError(f"'{spec}': an integer takes no precision")
    flags = ("-" if part["align"] == "<" else "") + \
        (part["sign"] if part["sign"] in ("+", " ") else "")
    flags += "#" if part["alternate"] else ""
    flags += "0" if part["zero"] or part["align"] == "=" else ""
    text = "%" + flags + (part["width"] or "")
    if part["precision"] is not None:
        text += "." + part["precision"]
    if kind in _FLOAT_TYPES:
        return Conversion(text + kind, "double")
    if kind == "c":
        return Conversion(text + "c", "int64")
    letter = {"d": "d", "n": "d", "x": "x", "X": "X", "o": "o"}[kind]
    if value_type.is_signed and letter == "d":
        return Conversion(text + "lld", "int64")
    return Conversion(text + "ll" + ("u" if letter == "d" else letter),
                      "int64" if value_type.is_signed else "uint64")


_PRINTF = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<precision>\d+))?"
                     r"(?:hh|h|ll|l|L|q|j|z|t)?(?P<type>[diouxXeEfFgGcs%])")


def from_printf(text: str) -> list[tuple[str, str | None]]:
    """A printf-style format (`"%.3f" % x`, as Python's `%` formats) as this module's
    pieces: (literal text, None) and ('', spec) per value."""
    pieces, position = [], 0
    for match in _PRINTF.finditer(text):
        if match.start() > position:
            pieces.append((text[position:match.start()], None))
        position = match.end()
        if match.group("type") == "%":
            pieces.append(("%", None))
            continue
        flags = match.group("flags")
        spec = ("<" if "-" in flags else "") + ("+" if "+" in flags else
                                                " " if " " in flags else "")
        spec += ("#" if "#" in flags else "") + ("0" if "0" in flags and "-" not in flags
                                                 else "")
        spec += (match.group("width") or "")
        if match.group("precision") is not None:
            spec += "." + match.group("precision")
        kind = match.group("type")
        spec += {"i": "d", "u": "d", "s": ""}.get(kind, kind)
        pieces.append(("", spec))
    if "%" in text[position:]:
        raise FormatError(f"'{text[position:]}' is not a printf conversion")
    if position < len(text):
        pieces.append((text[position:], None))
    return pieces


def escaped(text: str) -> str:
    """Literal text as the format writes it."""
    return text.replace("{", "{{").replace("}", "}}")
