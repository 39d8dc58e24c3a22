"""An independent, straightforward reading of RocketMQ 4.9's SQL92 filter (SelectorParser.jj
and org.apache.rocketmq.filter.expression) for the tests: a hand-written scanner, a recursive
descent parser building a tree, and a tree-walking evaluator over typed values.

Values are ``(type, value)`` pairs, type one of "int" (Integer), "long", "double", "string",
"bool"; ``None`` is Java's null. ``Fail`` is any Java exception raised while evaluating.

``reference_match(expr, props)`` is None when the parser refuses ``expr``, else whether a
broker delivers a message with those properties.
"""
from __future__ import annotations

import math
import re
from typing import Any

KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}


class Refused(Exception):
    pass


class Fail(Exception):
    pass


# ---- scanner -----------------------------------------------------------------------------

def scan(text: str) -> list[tuple[str, str]]:
    """(kind, image) tokens, lazily meaningful: an error token ("ERR") stops the list."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n\r\f":
            i += 1
            continue
        if text.startswith("--", i):
            j = i + 2
            while j < n and text[j] not in "\r\n":
                j += 1
            if j < n:  # a line comment needs its line end
                i = j + (2 if text.startswith("\r\n", j) else 1)
                continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end >= 0:
                i = end + 2
                continue
        if c == "'":
            j = i + 1
            chars = []
            while True:
                if j >= n:
                    out.append(("ERR", text[i:]))
                    return out
                if text[j] == "'":
                    if j + 1 < n and text[j + 1] == "'":
                        chars.append("'")
                        j += 2
                        continue
                    break
                chars.append(text[j])
                j += 1
            out.append(("STR", "".join(chars)))
            i = j + 1
            continue
        m = re.compile(r"([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+").match(text, i)
        if m:
            out.append(("FLOAT", m.group(0)))
            i = m.end()
            continue
        m = re.compile(r"0|[1-9][0-9]*[lL]?").match(text, i)
        if m:
            out.append(("DEC", m.group(0)))
            i = m.end()
            continue
        m = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*").match(text, i)
        if m:
            word = m.group(0)
            out.append(("KW", word.upper()) if word.upper() in KEYWORDS else ("ID", word))
            i = m.end()
            continue
        for op in (">=", "<=", "<>", ">", "<", "=", "(", ")", ",", "+", "-"):
            if text.startswith(op, i):
                out.append(("OP", op))
                i += len(op)
                break
        else:
            out.append(("ERR", c))
            return out
    return out


# ---- parser: nodes are tuples ("kind", ...) -------------------------------------------------

class Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        k = self.pos + ahead
        if k < len(self.tokens):
            if self.tokens[k][0] == "ERR":
                raise Refused("lexical error")
            return self.tokens[k]
        return ("EOF", "")

    def take(self) -> tuple[str, str]:
        t = self.peek()
        self.pos += 1
        return t

    def expect(self, kind: str, image: str | None = None) -> tuple[str, str]:
        t = self.take()
        if t[0] != kind or (image is not None and t[1] != image):
            raise Refused(f"expected {image or kind}, got {t}")
        return t

    def is_(self, kind: str, image: str, ahead: int = 0) -> bool:
        t = self.peek(ahead)
        return t[0] == kind and t[1] == image

    def selector(self) -> Any:
        return boolean_of(self.or_())

    def or_(self) -> Any:
        left = self.and_()
        while self.is_("KW", "OR"):
            self.take()
            left = ("or", boolean_of(left), boolean_of(self.and_()))
        return left

    def and_(self) -> Any:
        left = self.equality()
        while self.is_("KW", "AND"):
            self.take()
            left = ("and", boolean_of(left), boolean_of(self.equality()))
        return left

    def equality(self) -> Any:
        left = self.comparison()
        while True:
            if self.is_("OP", "="):
                self.take()
                left = make_equal(left, self.comparison())
            elif self.is_("OP", "<>"):
                self.take()
                left = ("not", make_equal(left, self.comparison()))
            elif self.is_("KW", "IS"):
                self.take()
                if self.is_("KW", "NULL"):
                    self.take()
                    left = ("eq", left, ("const", None, True))
                else:
                    self.expect("KW", "NOT")
                    self.expect("KW", "NULL")
                    left = ("not", ("eq", left, ("const", None, True)))
            else:
                return left

    def comparison(self) -> Any:
        left = self.unary()
        while True:
            t = self.peek()
            if t[0] == "OP" and t[1] in (">", ">=", "<", "<="):
                self.take()
                left = make_ordered(t[1], left, self.unary())
            elif self.is_("KW", "BETWEEN"):
                self.take()
                low = self.unary()
                self.expect("KW", "AND")
                left = make_between(left, low, self.unary())
            elif self.is_("KW", "IN"):
                self.take()
                left = make_in(left, self.string_list(), False)
            elif self.is_("KW", "NOT") and self.is_("KW", "BETWEEN", 1):
                self.pos += 2
                low = self.unary()
                self.expect("KW", "AND")
                high = self.unary()
                left = ("or", make_ordered("<", left, low), make_ordered(">", left, high))
            elif self.is_("KW", "NOT") and self.is_("KW", "IN", 1):
                self.pos += 2
                left = make_in(left, self.string_list(), True)
            elif self.is_("KW", "NOT"):
                raise Refused("NOT here starts neither NOT BETWEEN nor NOT IN")
            else:
                return left

    def string_list(self) -> list[str]:
        self.expect("OP", "(")
        items = [self.expect("STR")[1]]
        while self.is_("OP", ","):
            self.take()
            items.append(self.expect("STR")[1])
        self.expect("OP", ")")
        return items

    def unary(self) -> Any:
        if self.is_("OP", "+"):
            self.take()
            return self.unary()
        if self.is_("OP", "-"):
            self.take()
            return ("neg", self.unary())
        if self.is_("KW", "NOT"):
            self.take()
            return ("not", boolean_of(self.unary()))
        return self.primary()

    def primary(self) -> Any:
        t = self.take()
        if t[0] == "STR":
            return ("const", ("string", t[1]), False)
        if t[0] == "DEC":
            digits = t[1].rstrip("lL")
            v = int(digits)
            if v >= 2**63:
                raise Refused("long out of range")
            return ("const", ("int" if v < 2**31 else "long", v), False)
        if t[0] == "FLOAT":
            v = float(t[1])
            if v > 1.7976931348623157e308 or v < 5e-324:
                raise Refused("double out of range")
            return ("const", ("double", v), False)
        if t == ("KW", "TRUE"):
            return ("const", ("bool", True), True)
        if t == ("KW", "FALSE"):
            return ("const", ("bool", False), True)
        if t == ("KW", "NULL"):
            return ("const", None, True)
        if t[0] == "ID":
            return ("prop", t[1])
        if t == ("OP", "("):
            inner = self.or_()
            self.expect("OP", ")")
            return inner
        raise Refused(f"unexpected {t}")


BOOLEAN_NODES = {"or", "and", "not", "eq", "ord", "in", "cast"}


def is_boolean(node: Any) -> bool:
    return node[0] in BOOLEAN_NODES or (node[0] == "const" and node[2])


def boolean_of(node: Any) -> Any:
    if is_boolean(node):
        return node
    if node[0] == "prop":
        return ("cast", node)
    raise Refused("not a boolean expression")


def make_equal(left: Any, right: Any) -> Any:
    for node in (left, right):
        if node[0] == "const" and node[1] is None:
            raise Refused("NULL cannot be compared")
    if left[0] == "const" and right[0] == "const" and left[2] and not right[2]:
        raise Refused("incompatible constants")
    return ("eq", left, right)


def check_orderable(node: Any) -> None:
    if node[0] == "const":
        if node[1] is None or node[1][0] not in ("int", "long", "double"):
            raise Refused("cannot be compared")
    elif is_boolean(node):
        raise Refused("cannot be compared")


def make_ordered(op: str, left: Any, right: Any) -> Any:
    check_orderable(left)
    check_orderable(right)
    return ("ord", op, left, right)


def make_between(value: Any, low: Any, high: Any) -> Any:
    if low[0] == "const" and high[0] == "const":
        if low[1] is None or high[1] is None:
            raise Refused("between values can not be null")
        try:
            if compare(high[1], low[1]) < 0:
                raise Refused("between: low above high")
        except Fail:
            raise Refused("between values do not compare") from None
    return ("and", make_ordered(">=", value, low), make_ordered("<=", value, high))


def make_in(left: Any, items: list[str], negated: bool) -> Any:
    if left[0] != "prop":
        raise Refused("IN needs a property")
    return ("in", left, set(items), negated)


# ---- evaluation --------------------------------------------------------------------------

def to_int(text: str, bits: int) -> int:
    body = text[1:] if text[:1] in "+-" else text
    if not body or not all(ch.isdecimal() for ch in body):
        raise Fail("NumberFormatException")
    v = int(text)
    if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
        raise Fail("NumberFormatException")
    return v


def to_double(text: str) -> float:
    t = text.strip("".join(map(chr, range(33))))
    sign = ""
    if t and t[0] in "+-":
        sign, t = t[0], t[1:]
    if t in ("NaN", "Infinity"):
        return float(sign + t.replace("Infinity", "inf"))
    m = re.fullmatch(r"0[xX]([0-9a-fA-F]*\.?[0-9a-fA-F]*)[pP]([+-]?\d+)[fFdD]?", t, re.ASCII)
    if m and m.group(1) not in ("", "."):
        try:
            return float.fromhex(f"{sign}0x{m.group(1)}p{m.group(2)}")
        except OverflowError:
            return -math.inf if sign == "-" else math.inf
    if t[-1:] in ("f", "F", "d", "D"):
        t = t[:-1]
    if not re.fullmatch(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", t, re.ASCII):
        raise Fail("NumberFormatException")
    return float(sign + t)


def double_order(a: float, b: float) -> int:
    key_a = (1, 0.0, 0) if math.isnan(a) else (0, a, math.copysign(1, a))
    key_b = (1, 0.0, 0) if math.isnan(b) else (0, b, math.copysign(1, b))
    return (key_a > key_b) - (key_a < key_b)


def plain_order(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def compare(lv: tuple[str, Any], rv: tuple[str, Any]) -> int:
    lt, rt = lv[0], rv[0]
    a, b = lv[1], rv[1]
    if lt == rt:
        return double_order(a, b) if lt == "double" else plain_order(a, b)
    if lt == "bool":
        if rt == "string":
            raise Fail("ClassCastException")
        return -1
    if rt == "bool" and lt != "string":
        return -1
    if lt == "string":
        if rt == "bool":
            return plain_order(a.lower() == "true", b)
        if rt == "double":
            return double_order(to_double(a), b)
        return plain_order(to_int(a, 32 if rt == "int" else 64), b)
    if rt == "string":
        if lt == "double":
            return double_order(a, to_double(b))
        return plain_order(a, to_int(b, 32 if lt == "int" else 64))
    if "double" in (lt, rt):
        return double_order(float(a), float(b))
    return plain_order(a, b)


def evaluate(node: Any, props: dict[str, str]) -> Any:
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind == "prop":
        v = props.get(node[1])
        return None if v is None else ("string", v)
    if kind == "cast":
        v = evaluate(node[1], props)
        if v is None:
            return None
        return v if v[0] == "bool" else ("bool", False)
    if kind == "neg":
        v = evaluate(node[1], props)
        if v is None or v[0] not in ("int", "long", "double"):
            return None
        return (v[0], -v[1])
    if kind == "not":
        v = evaluate(node[1], props)
        if v is None:
            return None
        if v[0] != "bool":
            raise Fail("ClassCastException")
        return ("bool", not v[1])
    if kind in ("and", "or"):
        stop = kind == "or"   # the value that decides
        left = evaluate(node[1], props)
        if left is not None and left[0] != "bool":
            raise Fail("ClassCastException")
        if left is not None and left[1] == stop:
            return ("bool", stop)
        right = evaluate(node[2], props)
        if right is not None and right[0] != "bool":
            raise Fail("ClassCastException")
        if right is not None and right[1] == stop:
            return ("bool", stop)
        if left is None or right is None:
            return None
        return ("bool", not stop)
    if kind == "eq":
        lv, rv = evaluate(node[1], props), evaluate(node[2], props)
        if lv is None and rv is None:
            return ("bool", True)
        if lv is None:
            return None
        if rv is None:
            return ("bool", False)
        return ("bool", compare(lv, rv) == 0)
    if kind == "ord":
        lv = evaluate(node[2], props)
        if lv is None:
            return None
        rv = evaluate(node[3], props)
        if rv is None:
            return None
        if lv[0] == "string" and rv[0] == "string":
            c = double_order(to_double(lv[1]), to_double(rv[1]))
        else:
            c = compare(lv, rv)
        return ("bool", {">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[node[1]])
    if kind == "in":
        v = evaluate(node[1], props)
        if v is None or v[0] != "string":
            return None
        return ("bool", (v[1] in node[2]) != node[3])
    raise AssertionError(kind)


def reference_compile(expr: str) -> Any | None:
    try:
        return Parser(scan(expr)).selector()
    except Refused:
        return None


def reference_match(expr: str, props: dict[str, str]) -> bool | None:
    tree = reference_compile(expr)
    if tree is None:
        return None
    try:
        return evaluate(tree, props) == ("bool", True)
    except Fail:
        return False


# ---- random expressions and properties (for property tests) ------------------------------

PROPERTY_NAMES = ("a", "b", "c", "TAGS")
PROPERTY_VALUES = ("5", "5.0", "-3", "0", "2147483648", "abc", "x", "y", "true", "TRUE", "false",
                   "NaN", " 7 ", "1e3", "+4", "", "it's", "-0.0", "9223372036854775808")
_LITERALS = ("5", "0", "-3", "1.5", "2147483648", "3000000000L", "1e3", ".5", "'x'", "'abc'",
             "'5'", "'it''s'", "TRUE", "FALSE", "NULL", "'true'")


def random_expression(rng: Any, depth: int = 3) -> str:
    """A random expression, mostly well-formed, sometimes not (the parser must refuse it)."""
    def operand() -> str:
        r = rng.random()
        if r < 0.5:
            return rng.choice(PROPERTY_NAMES)
        if r < 0.9:
            return rng.choice(_LITERALS)
        return f"-{rng.choice(PROPERTY_NAMES + ('5', '1.5'))}"

    def predicate(d: int) -> str:
        r = rng.random()
        if d > 0 and r < 0.3:
            op = rng.choice((" AND ", " OR ", " and ", " Or "))
            return f"{predicate(d - 1)}{op}{predicate(d - 1)}"
        if d > 0 and r < 0.4:
            return f"NOT {predicate(d - 1)}" if rng.random() < 0.5 else f"({predicate(d - 1)})"
        kind = rng.randrange(8)
        if kind <= 2:
            return f"{operand()} {rng.choice(('=', '<>', '>', '>=', '<', '<='))} {operand()}"
        if kind == 3:
            neg = "NOT " if rng.random() < 0.5 else ""
            return f"{operand()} {neg}BETWEEN {operand()} AND {operand()}"
        if kind == 4:
            neg = "NOT " if rng.random() < 0.5 else ""
            items = ", ".join(rng.choice(("'x'", "'y'", "'5'", "'abc'", "''")) for _ in range(rng.randint(1, 6)))
            return f"{operand()} {neg}IN ({items})"
        if kind == 5:
            return f"{operand()} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
        if kind == 6:
            return rng.choice(PROPERTY_NAMES + ("TRUE", "FALSE", "NULL"))
        return f"{operand()} {rng.choice(('=', '>'))}"   # incomplete: refused

    text = predicate(depth)
    if rng.random() < 0.05:
        text += rng.choice((" trailing", " )", " #", " 5"))
    return text


def random_properties(rng: Any) -> dict[str, str]:
    return {name: rng.choice(PROPERTY_VALUES) for name in PROPERTY_NAMES if rng.random() < 0.7}
