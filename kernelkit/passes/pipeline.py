"""The registry of passes by name, and running a list of them. A pass's options are the
fields of its dataclass; a pipeline names a pass with options as `name{option=value}`."""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Callable

from ..errors import KernelkitError
from ..ir.function import Module
from ..ir.verifier import verify_module

PASSES: dict[str, type] = {}


def register(cls):
    PASSES[cls.name] = cls
    return cls


def pass_named(spec: str):
    """An instance of the pass `spec` names: `name`, or `name{option=value,...}` where
    the options are fields of the pass (`simplify{speculated_ops=8}`)."""
    name, brace, options = spec.partition("{")
    name = name.strip()
    if name not in PASSES:
        raise KernelkitError(f"unknown pass '{name}'; the passes are: "
                             f"{', '.join(sorted(PASSES))}")
    cls = PASSES[name]
    if not brace:
        return cls()
    if not options.endswith("}"):
        raise KernelkitError(f"pass '{spec}': options are written "
                             f"'{name}{{option=value,...}}'")
    values = {}
    for assignment in filter(str.strip, options[:-1].split(",")):
        option, equals, text = (part.strip() for part in assignment.partition("="))
        values[option] = _option_value(cls, option, text if equals else None)
    return cls(**values)


def _option_value(cls, option: str, text: str | None):
    """`text` as a value of the field `option` of the pass `cls`, by the field's type."""
    fields = dataclasses.fields(cls)
    types = typing.get_type_hints(cls)
    known = ", ".join(f"{field.name}: {types[field.name].__name__} = {field.default!r}"
                      for field in fields)
    listing = f"its options are: {known}" if known else "it has no options"
    if option not in {field.name for field in fields}:
        raise KernelkitError(f"pass '{cls.name}' has no option '{option}'; {listing}")
    expected = types[option]
    if text is not None:
        if expected is bool and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if expected in (int, float, str):
            try:
                return expected(text)
            except ValueError:
                pass
    given = "" if text is None else f", not {text!r}"
    raise KernelkitError(f"pass '{cls.name}': option '{option}' takes a value of type "
                         f"{expected.__name__}{given}; {listing}")


def split_pipeline(text: str) -> tuple[str, ...]:
    """The pass specs in `text`, separated by commas outside braces (`simplify{a=1,b=2},
    dce` is two passes)."""
    specs, depth, current = [], 0, ""
    for character in text:
        if character == "," and depth == 0:
            specs.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(character, 0)
        current += character
    specs.append(current)
    return tuple(spec.strip() for spec in specs if spec.strip())


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Passes run in order (`names` as `pass_named` reads them, options included);
    `after_each(name, module)` is called between them (dumps, timing); `verify` checks
    the IR after every pass."""

    names: tuple[str, ...]
    verify: bool = False

    def __call__(self, module: Module, after_each: Callable | None = None) -> Module:
        for name in self.names:
            pass_named(name)(module)
            if self.verify:
                verify_module(module)
            if after_each is not None:
                after_each(name, module)
        return module


def run_passes(module: Module, names, verify: bool = False) -> Module:
    return Pipeline(tuple(names), verify)(module)
