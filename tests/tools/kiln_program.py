"""A reader of kiln's program text (docs/ir.md) for the Python peer checks: the programs of
tests/transforms/jax_programs.kp become Program objects that jax_transforms_check.py turns
into JAX functions. It reads what the checks need (inputs, literals, params, strings, nested
programs, sharded types), not the whole grammar: declared constants (which have no values) and scope
comments are refused or skipped.

    read_program_file(path, dtype) -> [ProgramSpec]   each program with every f32 as dtype
"""
import re
from dataclasses import dataclass, field

PUNCTUATION = set("{}()[],;:=~.")
RESERVED = {"lambda", "let", "in", "true", "false", "none", "nan", "inf"}
LITERAL_WORDS = {"true", "false", "nan", "inf"}
TOKEN = re.compile(r'\s+|#[^\n]*|"[^"]*"|[A-Za-z_]\w*|-?(?:inf|nan|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|.')


@dataclass
class Type:
    dtype: str
    shape: tuple
    sharding: str = None  # "{data,_}" for a sharded type (the outputs of shard_map)


@dataclass
class Literal:
    value: object
    type: Type


@dataclass
class Equation:
    outputs: list      # [(name, Type)]
    prim: str
    params: dict
    operands: list     # names (str) or Literals


@dataclass
class Program:
    inputs: list       # [(name, Type)]
    equations: list
    outputs: list      # names or Literals


@dataclass
class ProgramSpec:
    name: str
    line: int
    ints: int = 0
    nograd: bool = False
    text: str = ""
    program: Program = field(default=None)


class ParseError(ValueError):
    pass


def tokenize(text):
    tokens = []
    for match in TOKEN.finditer(text):
        token = match.group(0)
        if token.isspace() or token.startswith("#"):
            continue
        tokens.append(token)
    return tokens


def is_name(token):
    return re.fullmatch(r"[A-Za-z_]\w*", token) is not None and token not in RESERVED


def is_number(token):
    return token[0].isdigit() or token.startswith("-")


class Parser:
    def __init__(self, text):
        self.tokens = tokenize(text)
        self.at = 0

    def peek(self, ahead=0):
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else "<end>"

    def next(self):
        token = self.peek()
        self.at += 1
        return token

    def expect(self, token):
        found = self.next()
        if found != token:
            raise ParseError(f"expected '{token}', found '{found}' (token {self.at})")

    def program(self):
        self.expect("{")
        self.expect("lambda")
        if self.peek() != ";":
            raise ParseError("declared constants have no values; write literals instead")
        self.expect(";")
        inputs = []
        while self.peek() != ".":
            inputs.append(self.binder())
        self.expect(".")
        self.expect("let")
        equations = []
        while self.peek() != "in":
            equations.append(self.equation())
        self.expect("in")
        self.expect("(")
        outputs = []
        while self.peek() != ")":
            outputs.append(self.atom())
        self.expect(")")
        self.expect("}")
        return Program(inputs, equations, outputs)

    def type(self):
        dtype = self.next()
        if self.peek() == "~":
            self.next()
        self.expect("[")
        sizes = []
        while self.peek() != "]":
            sizes.append(int(self.next()))
            if self.peek() == ",":
                self.next()
        self.expect("]")
        sharding = None
        if self.peek() == "{" and self.peek(1) != "lambda":
            parts = []
            while parts[-1:] != ["}"]:
                parts.append(self.next())
            sharding = "".join(parts)
        return Type(dtype, tuple(sizes), sharding)

    def binder(self):
        name = self.next()
        if not is_name(name):
            raise ParseError(f"expected a variable name, found '{name}'")
        self.expect(":")
        return name, self.type()

    def equation(self):
        outputs = [self.binder()]
        while self.peek() != "=":
            outputs.append(self.binder())
        self.expect("=")
        prim = self.next()
        params = {}
        if self.peek() == "[":
            self.next()
            while self.peek() != "]":
                name = self.next()
                self.expect("=")
                params[name] = self.value()
            self.expect("]")
        operands = []
        while self.peek() not in ("in", "<end>") and not (is_name(self.peek()) and self.peek(1) == ":"):
            operands.append(self.atom())
        return Equation(outputs, prim, params, operands)

    def value(self):
        token = self.peek()
        if token == "{":
            return self.program()
        if token == "(":
            self.next()
            items = []
            while self.peek() != ")":
                items.append(self.program() if self.peek() == "{" else int(self.next()))
                if self.peek() == ",":
                    self.next()
            self.expect(")")
            return tuple(items)
        self.next()
        if token.startswith('"'):
            return token[1:-1]  # a string: shard_map's mesh and specs, a collective's axes
        if is_number(token):
            return int(token)
        if token in ("true", "false"):
            return token == "true"
        return token  # a dtype, none, or an index mode

    def atom(self):
        token = self.next()
        if (is_number(token) or token in LITERAL_WORDS) and self.peek() == ":":
            self.next()
            literal_type = self.type()
            if literal_type.dtype == "bool":
                value = token == "true"
            elif literal_type.dtype.startswith(("f", "bf")):
                value = float(token)
            else:
                value = int(token)
            return Literal(value, literal_type)
        if not is_name(token):
            raise ParseError(f"expected an operand, found '{token}'")
        return token


def read_program_file(path, dtype="f32"):
    """The programs of a cross-check file, each parsed with every f32 replaced by dtype."""
    specs = []
    with open(path) as lines:
        for number, line in enumerate(lines, start=1):
            words = line.split()
            if words and words[0] == "program":
                spec = ProgramSpec(name=words[1], line=number)
                for flag in words[2:]:
                    if flag == "nograd":
                        spec.nograd = True
                    elif flag.startswith("ints="):
                        spec.ints = int(flag[5:])
                    else:
                        raise ParseError(f"{path}:{number}: unknown flag '{flag}'")
                specs.append(spec)
            elif specs:
                specs[-1].text += line
    for spec in specs:
        try:
            spec.program = Parser(spec.text.replace("f32", dtype)).program()
        except (ParseError, ValueError) as error:
            raise ParseError(f"{path}:{spec.line}: program {spec.name}: {error}") from error
    return specs
