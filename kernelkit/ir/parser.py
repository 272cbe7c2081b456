"""Reads the IR's text form (see `printer.py`) back into a module: print -> parse ->
print gives the same text, so a dumped module can be replayed by an offline tool.

Values may be used before the line that defines them (a loop's body block can come
before its header in the text), so a function is read in two steps: every block, block
parameter and operation is made first, then operands and branch targets are resolved by
name. A text that does not parse raises `IRParseError` with its line and column."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..errors import KernelkitError
from .definitions import CONST, DEFINITIONS
from .function import Block, Function, Module
from .ops import Location, Op, Successor
from .types import IRType, parse_type, split_top_level


class IRParseError(KernelkitError):
    def __init__(self, message: str, line: int, column: int, source: str = "<ir>"):
        self.line, self.column = line, column
        super().__init__(f"{source}:{line}:{column}: {message}")


_FUNCTION = re.compile(r'^(kernel|func) @([^(\s]+)\((.*?)\) -> (.+?) file (".*")'
                       r'( disjoint_arrays)? \{$')
_BLOCK = re.compile(r"^\^bb(\d+)\((.*)\):$")


@dataclass
class _RawOp:
    result: str | None
    opcode: str
    operands: list            # (name, column)
    successors: list          # (label, column, [(name, column)])
    attrs: dict
    type: IRType
    loc: Location | None
    line: int


@dataclass
class _RawBlock:
    label: str
    params: list              # (name, type, column)
    line: int
    ops: list = field(default_factory=list)


def parse_module(text: str, source: str = "<ir>") -> Module:
    module = Module()
    lines = text.split("\n")
    number = 0
    while number < len(lines):
        if not lines[number].strip():
            number += 1
            continue
        function, number = _parse_function(lines, number, source)
        module.add(function)
    return module


def _parse_function(lines: list[str], start: int, source: str) -> tuple[Function, int]:
    header = _FUNCTION.match(lines[start])
    if header is None:
        raise IRParseError("expected 'kernel @name(args) -> type file \"...\" {' or "
                           "'func @name(...) ...'", start + 1, 1, source)
    kind, name, arguments, return_type, file, disjoint = header.groups()
    function = Function(name, [a.strip() for a in arguments.split(",") if a.strip()],
                        _type(return_type, start + 1, header.start(4) + 1, source),
                        is_kernel=kind == "kernel", source_file=json.loads(file),
                        disjoint_arrays=bool(disjoint))
    blocks: list[_RawBlock] = []
    number = start + 1
    while True:
        if number >= len(lines) or not lines[number].strip():
            raise IRParseError(f"@{name} is not closed with '}}'", number + 1, 1, source)
        line = lines[number]
        if line == "}":
            break
        if line.startswith("  "):
            if not blocks:
                raise IRParseError("an operation outside a block", number + 1, 1, source)
            blocks[-1].ops.append(_OpScanner(line, number + 1, source, function).op())
        else:
            match = _BLOCK.match(line)
            if match is None:
                raise IRParseError("expected a block label '^bbN(...):', an operation "
                                   "indented by two spaces, or '}'", number + 1, 1, source)
            blocks.append(_RawBlock(f"^bb{match.group(1)}", _block_params(
                match.group(2), number + 1, match.start(2), source), number + 1))
        number += 1
    _build(function, blocks, source)
    return function, number + 1


def _block_params(text: str, line: int, offset: int, source: str) -> list:
    params = []
    for part in split_top_level(text):
        name, colon, type_text = part.partition(":")
        column = text.find(part) + offset + 1
        if not colon or not name.strip().startswith("%"):
            raise IRParseError(f"expected '%name: type', got {part.strip()!r}", line, column,
                               source)
        params.append((name.strip(), _type(type_text, line, column, source), column))
    return params


def _build(function: Function, raw_blocks: list[_RawBlock], source: str) -> None:
    values: dict[str, object] = {}
    blocks: dict[str, Block] = {}
    for raw in raw_blocks:
        block = Block()
        for name, type, column in raw.params:
            if name in values:
                raise IRParseError(f"{name} is defined twice", raw.line, column, source)
            values[name] = block.add_param(type)
        blocks[raw.label] = function.add_block(block)
    made = []
    for raw in raw_blocks:
        block = blocks[raw.label]
        for raw_op in raw.ops:
            op = block.append(Op(raw_op.opcode, [], raw_op.type, raw_op.attrs, loc=raw_op.loc))
            if raw_op.result is not None:
                if raw_op.result in values:
                    raise IRParseError(f"{raw_op.result} is defined twice", raw_op.line, 1,
                                       source)
                values[raw_op.result] = op
            made.append((op, raw_op))

    def value(name, line, column):
        if name not in values:
            raise IRParseError(f"{name} is not defined in @{function.name}", line, column,
                               source)
        return values[name]

    for op, raw_op in made:
        op.operands = [value(n, raw_op.line, c) for n, c in raw_op.operands]
        for label, column, args in raw_op.successors:
            if label not in blocks:
                raise IRParseError(f"{label} is not a block of @{function.name}", raw_op.line,
                                   column, source)
            op.successors.append(Successor(blocks[label],
                                           [value(n, raw_op.line, c) for n, c in args]))


def _type(text: str, line: int, column: int, source: str) -> IRType:
    try:
        return parse_type(text)
    except (ValueError, KeyError, IndexError):
        raise IRParseError(f"unknown type {text.strip()!r}", line, column, source) from None


class _OpScanner:
    """One operation line: `[%r = ]opcode [operands][, ^bbN(args)...] [{attrs}]
    [: type] [@[file:]line:column]`."""

    def __init__(self, text: str, line: int, source: str, function: Function):
        self.text, self.line, self.source, self.function = text, line, source, function
        self.position = 2

    def error(self, message: str):
        return IRParseError(message, self.line, self.position + 1, self.source)

    def peek(self) -> str:
        return self.text[self.position] if self.position < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.peek() == " ":
            self.position += 1

    def accept(self, literal: str) -> bool:
        self.skip_spaces()
        if self.text.startswith(literal, self.position):
            self.position += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.accept(literal):
            raise self.error(f"expected {literal!r}")

    def word(self, pattern: str = r"[A-Za-z_][A-Za-z_0-9]*") -> str:
        self.skip_spaces()
        match = re.compile(pattern).match(self.text, self.position)
        if match is None:
            raise self.error("expected a name")
        self.position = match.end()
        return match.group(0)

    def value_name(self) -> tuple[str, int]:
        column = self.position + 1
        return self.word(r"%\d+"), column

    def op(self) -> _RawOp:
        result = None
        self.skip_spaces()
        if self.peek() == "%":
            result, _ = self.value_name()
            self.expect("=")
        self.skip_spaces()
        column = self.position
        opcode = self.word(r"[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)?")
        if opcode not in DEFINITIONS:
            self.position = column
            raise self.error(f"unknown operation {opcode!r}")
        operands, successors, attrs = [], [], {}
        constant = None
        if DEFINITIONS[opcode] is CONST:
            constant = self.attribute()
        else:
            self.skip_spaces()
            while self.peek() in ("%", "^"):
                if self.peek() == "%":
                    operands.append(self.value_name())
                else:
                    successors.append(self.successor())
                if not self.accept(","):
                    break
                self.skip_spaces()
        self.skip_spaces()
        if self.peek() == "{":
            attrs = self.attributes()
        type_ = _type("void", self.line, 1, self.source)
        if self.accept(":"):
            self.skip_spaces()
            start = self.position
            end = self.text.find(" @", start)
            end = len(self.text) if end < 0 else end
            type_ = _type(self.text[start:end], self.line, start + 1, self.source)
            self.position = end
        loc = None
        if self.accept("@"):
            loc = self.location()
        self.skip_spaces()
        if self.position != len(self.text):
            raise self.error(f"unexpected {self.text[self.position:]!r}")
        if constant is not None:
            attrs["value"] = _constant_value(constant, type_)
        return _RawOp(result, opcode, operands, successors, attrs, type_, loc, self.line)

    def successor(self) -> tuple[str, int, list]:
        column = self.position + 1
        label = self.word(r"\^bb\d+")
        self.expect("(")
        args = []
        self.skip_spaces()
        while self.peek() == "%":
            args.append(self.value_name())
            if not self.accept(","):
                break
            self.skip_spaces()
        self.expect(")")
        return label, column, args

    def attributes(self) -> dict:
        self.expect("{")
        attrs = {}
        while not self.accept("}"):
            if attrs:
                self.expect(",")
            name = self.word()
            self.expect("=")
            attrs[name] = self.attribute()
        return attrs

    def attribute(self):
        self.skip_spaces()
        char = self.peek()
        if char == '"':
            decoder = json.JSONDecoder()
            try:
                value, end = decoder.raw_decode(self.text, self.position)
            except ValueError:
                raise self.error("a string that does not end") from None
            self.position = end
            return value
        if char == "[":
            self.position += 1
            items = []
            while not self.accept("]"):
                if items:
                    self.expect(",")
                items.append(self.attribute())
            return tuple(items)
        if self.text.startswith("type<", self.position):
            self.position += len("type")
            start, depth = self.position, 0
            while self.position < len(self.text):
                depth += {"<": 1, ">": -1}.get(self.peek(), 0)
                self.position += 1
                if depth == 0:
                    break
            return _type(self.text[start + 1:self.position - 1], self.line, start + 1,
                         self.source)
        word = self.word(r"true|false|[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)")
        if word in ("true", "false"):
            return word == "true"
        return float(word) if any(c in word for c in ".eE") else int(word)

    def location(self) -> Location:
        file = self.function.source_file
        if self.peek() == '"':
            file = self.attribute()
            self.expect(":")
        line = int(self.word(r"\d+"))
        self.expect(":")
        column = int(self.word(r"\d+"))
        return Location(line, column, file)


def _constant_value(value, type: IRType):
    """A constant's value in the Python type the compiler uses for its IR type."""
    if getattr(type, "is_float", False):
        return float(value)
    if getattr(type, "is_bool", False):
        return bool(value)
    return int(value)
