"""SQL92 filter expressions (RocketMQ's ExpressionType.SQL92, its filter module's
SelectorParser and org.apache.rocketmq.filter.expression), parsed with lark and compiled
once per distinct expression into Python closures evaluated over a message's properties.

The semantics are RocketMQ 4.9's, quirks included:

- Property values are strings. A comparison with a number converts the string (an ``int``
  range constant as Java's Integer.valueOf, a larger one as Long.valueOf, a decimal as
  Double.valueOf); a string that does not convert makes the whole expression false.
  ``>``, ``>=``, ``<``, ``<=`` between two strings compare them as doubles.
- A missing property is NULL: a comparison with it is NULL (``'x' = a`` is FALSE, though,
  so ``'x' <> a`` is TRUE), AND/OR/NOT are three-valued, and a message matches only when
  the expression is TRUE.
- ``a = TRUE`` matches a property ``true`` in any case; a property on its own is FALSE
  (NULL when missing), so ``NOT a`` selects the messages that have ``a``.
- The parser stops at the first token that cannot continue the expression and ignores the
  rest (JavaCC without EOF): ``a = 'x' trailing`` is ``a = 'x'``.
- No LIKE, no arithmetic; IN lists hold string literals only.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketstore.common.text import quote

if TYPE_CHECKING:
    from lark import Lark, Token, Tree

#: SubscriptionData.expressionType of SQL92 expressions.
EXPRESSION_TYPE_SQL92 = "SQL92"

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_DOUBLE_MIN_POSITIVE = 5e-324

_KEYWORD_END = r"(?![a-zA-Z0-9_$])"
_GRAMMAR = rf"""
?start: or_expr
?or_expr: and_expr | or_expr OR and_expr -> or_
?and_expr: eq_expr | and_expr AND eq_expr -> and_
?eq_expr: cmp_expr
    | eq_expr "=" cmp_expr -> eq
    | eq_expr "<>" cmp_expr -> ne
    | eq_expr IS NULL -> is_null
    | eq_expr IS NOT NULL -> is_not_null
?cmp_expr: unary
    | cmp_expr ">" unary -> gt
    | cmp_expr ">=" unary -> ge
    | cmp_expr "<" unary -> lt
    | cmp_expr "<=" unary -> le
    | cmp_expr BETWEEN unary AND unary -> between
    | cmp_expr NOT BETWEEN unary AND unary -> not_between
    | cmp_expr IN "(" strings ")" -> in_
    | cmp_expr NOT IN "(" strings ")" -> not_in
strings: STRING ("," STRING)*
?unary: "+" unary
    | "-" unary -> negate
    | NOT unary -> not_
    | primary
?primary: STRING -> string
    | DECIMAL -> decimal
    | FLOAT -> float_
    | TRUE -> true
    | FALSE -> false
    | NULL -> null
    | ID -> prop
    | "(" or_expr ")"

NOT.4: /not{_KEYWORD_END}/i
AND.4: /and{_KEYWORD_END}/i
OR.4: /or{_KEYWORD_END}/i
BETWEEN.4: /between{_KEYWORD_END}/i
IN.4: /in{_KEYWORD_END}/i
TRUE.4: /true{_KEYWORD_END}/i
FALSE.4: /false{_KEYWORD_END}/i
NULL.4: /null{_KEYWORD_END}/i
IS.4: /is{_KEYWORD_END}/i
FLOAT.3: /[0-9]+\.[0-9]*(e[+-]?[0-9]+)?|\.[0-9]+(e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+/i
DECIMAL.2: /0|[1-9][0-9]*[lL]?/
STRING.2: /'(?:''|[^'])*'/
ID.1: /[a-zA-Z_$][a-zA-Z0-9_$]*/
LINE_COMMENT.5: /--[^\n\r]*(\r\n|\n|\r)/
BLOCK_COMMENT.5: /\/\*[^*]*\*+(?:[^*\/][^*]*\*+)*\//
WS: /[ \t\n\r\f]+/
%ignore WS
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""


class FilterExpressionError(ValueError):
    """An expression RocketMQ's SelectorParser refuses (MQFilterException)."""


class _EvalError(Exception):
    """A Java runtime exception during evaluation (NumberFormatException, ClassCastException):
    the message does not match."""


@functools.cache
def _parser() -> Lark:
    # imported on first use: clients and stores without SQL92 subscriptions never load lark
    from lark import Lark
    return Lark(_GRAMMAR, parser="lalr", lexer="basic", maybe_placeholders=False)


# ---- values: Java's Integer, Long, Double, String, Boolean, null --------------------------

class JavaInt(int):
    """A java.lang.Integer (a literal within int range); plain ``int`` is a Long."""

    __slots__ = ()


Value = None | bool | int | float | str
Evaluator = Callable[[Mapping[str, str]], Value]

_JAVA_INT_TEXT = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE_TEXT = re.compile(
    r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)", re.ASCII)
_JAVA_HEX_DOUBLE_TEXT = re.compile(
    r"([+-]?)0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP]([+-]?\d+)[fFdD]?", re.ASCII)


def _parse_integral(text: str, low: int, high: int) -> int:
    """Integer.valueOf / Long.valueOf: a sign and decimal digits (any script), in range."""
    if not _JAVA_INT_TEXT.fullmatch(text) or not all(c.isdecimal() for c in text.lstrip("+-")):
        raise _EvalError(f"For input string: {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise _EvalError(f"For input string: {text!r}")
    return value


def java_parse_int(text: str) -> JavaInt:
    return JavaInt(_parse_integral(text, _INT_MIN, _INT_MAX))


def java_parse_long(text: str) -> int:
    return _parse_integral(text, _LONG_MIN, _LONG_MAX)


def java_parse_double(text: str) -> float:
    """Double.valueOf: trimmed, decimal or hexadecimal, NaN, Infinity, an f/d suffix."""
    trimmed = text.strip("".join(chr(c) for c in range(33)))
    if _JAVA_DOUBLE_TEXT.fullmatch(trimmed):
        body = trimmed.rstrip("fFdD") if not trimmed.endswith(("NaN", "Infinity")) else trimmed
        return float(body.replace("Infinity", "inf"))
    hex_match = _JAVA_HEX_DOUBLE_TEXT.fullmatch(trimmed)
    if hex_match:
        sign, mantissa, exponent = hex_match.groups()
        try:
            return float.fromhex(f"{sign}0x{mantissa}p{exponent}")
        except OverflowError:
            return -math.inf if sign == "-" else math.inf
    raise _EvalError(f"For input string: {text!r}")


def _string_converter(constant: Value) -> Callable[[str], Value]:
    """How a property's string is converted to compare with a constant (java_compare's
    String-against-X branches), with a fast path for plain ASCII digits."""
    kind = _kind(constant)
    if kind == "I" or kind == "L":
        low, high = (_INT_MIN, _INT_MAX) if kind == "I" else (_LONG_MIN, _LONG_MAX)

        def integral(text: str) -> Value:
            if text.isascii() and text.isdigit():
                value = int(text)
                if value <= high:
                    return value
            return _parse_integral(text, low, high)
        return integral
    if kind == "D":
        def double(text: str) -> Value:
            if text.isascii() and text.isdigit():
                return float(text)
            return java_parse_double(text)
        return double
    if kind == "B":
        return lambda text: text.lower() == "true"
    return lambda text: text


def _kind(value: Value) -> str:
    if isinstance(value, bool):
        return "B"
    if isinstance(value, JavaInt):
        return "I"
    if isinstance(value, int):
        return "L"
    if isinstance(value, float):
        return "D"
    return "S"


def _compare_double(a: float, b: float) -> int:
    """Double.compareTo: NaN above everything and equal to itself, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    if a == 0.0:
        sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
        return (sa > sb) - (sa < sb)
    return 0


def _cmp(a: object, b: object) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def _compare_same(kind: str, lv: Value, rv: Value) -> int:
    if kind == "D":
        return _compare_double(lv, rv)  # type: ignore[arg-type]
    return _cmp(lv, rv)


def java_compare(lv: Value, rv: Value) -> int:
    """ComparisonExpression.__compare with string conversion on (its parser's setting)."""
    lk, rk = _kind(lv), _kind(rv)
    if lk == rk:
        return _compare_same(lk, lv, rv)
    if lk == "B":
        if rk == "S":
            raise _EvalError("ClassCastException: Boolean cannot be cast to String")
        return -1
    if lk == "I" or lk == "L":
        if rk == "D":
            return _compare_double(float(lv), rv)  # type: ignore[arg-type]
        if rk == "S":
            parsed = java_parse_int(rv) if lk == "I" else java_parse_long(rv)  # type: ignore[arg-type]
            return _cmp(lv, parsed)
        if rk == "B":
            return -1
        return _cmp(lv, rv)  # Integer and Long: both as long
    if lk == "D":
        if rk == "S":
            return _compare_double(lv, java_parse_double(rv))  # type: ignore[arg-type]
        if rk == "B":
            return -1
        return _compare_double(lv, float(rv))  # type: ignore[arg-type]
    # a String against a Boolean or a number
    if rk == "B":
        return _cmp(lv.lower() == "true", rv)  # type: ignore[union-attr]
    if rk == "I":
        return _cmp(java_parse_int(lv), rv)  # type: ignore[arg-type]
    if rk == "L":
        return _cmp(java_parse_long(lv), rv)  # type: ignore[arg-type]
    return _compare_double(java_parse_double(lv), rv)  # type: ignore[arg-type]


# ---- expression nodes, as SelectorParser builds them --------------------------------------

@dataclass(frozen=True)
class _Node:
    evaluate: Evaluator
    #: "const" (a literal), "bool_const" (TRUE, FALSE, NULL), "prop", "bool" (a boolean
    #: expression), "other" (a negation)
    kind: str
    value: Value = None


def _constant(value: Value, kind: str = "const") -> _Node:
    return _Node(lambda props: value, kind, value)


def _as_boolean(node: _Node) -> _Node:
    """asBooleanExpression: a property becomes a boolean cast (FALSE unless missing)."""
    if node.kind in ("bool", "bool_const"):
        return node
    if node.kind == "prop":
        inner = node.evaluate

        def cast(props: Mapping[str, str]) -> Value:
            value = inner(props)
            if value is None:
                return None
            return value if isinstance(value, bool) else False
        return _Node(cast, "bool")
    raise FilterExpressionError(f"Expression will not result in a boolean value: {_describe(node)}")


def _describe(node: _Node) -> str:
    return repr(node.value) if node.kind in ("const", "bool_const") else node.kind


def _check_less_than_operand(node: _Node) -> None:
    if node.kind in ("const", "bool_const"):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return
        raise FilterExpressionError(f"Value {_describe(node)} cannot be compared.")
    if node.kind == "bool":
        raise FilterExpressionError("a boolean expression cannot be compared.")


def _check_equal_operands(left: _Node, right: _Node) -> None:
    for node in (left, right):
        if node.kind == "bool_const" and node.value is None:
            raise FilterExpressionError("'NULL' cannot be compared.")
    if left.kind == "bool_const" and right.kind == "const":
        raise FilterExpressionError(f"{_describe(left)} cannot be compared with {_describe(right)}")


def _equal(left: _Node, right: _Node) -> _Node:
    if left.kind == "prop" and right.kind in ("const", "bool_const") and right.value is not None:
        return _equal_property_constant(left, right.value)
    le, re_ = left.evaluate, right.evaluate

    def equal(props: Mapping[str, str]) -> Value:
        lv = le(props)
        rv = re_(props)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        lk, rk = _kind(lv), _kind(rv)
        if lk == rk:
            return _compare_same(lk, lv, rv) == 0
        return java_compare(lv, rv) == 0
    return _Node(equal, "bool")


def _equal_property_constant(prop: _Node, constant: Value) -> _Node:
    """``property = constant``, the common case, with the conversion chosen once."""
    inner, convert = prop.evaluate, _string_converter(constant)
    is_double = isinstance(constant, float)

    def equal(props: Mapping[str, str]) -> Value:
        text = inner(props)
        if text is None:
            return None
        value = convert(text)  # type: ignore[arg-type]
        if is_double:
            return _compare_double(value, constant) == 0  # type: ignore[arg-type]
        return value == constant
    return _Node(equal, "bool")


def _ordered_property_constant(op: str, prop: _Node, constant: Value) -> _Node:
    """``property > number`` and the like, with the conversion chosen once."""
    inner, convert, test = prop.evaluate, _string_converter(constant), _ORDERED[op]
    if isinstance(constant, float):
        def ordered_double(props: Mapping[str, str]) -> Value:
            text = inner(props)
            if text is None:
                return None
            return test(_compare_double(convert(text), constant))  # type: ignore[arg-type]
        return _Node(ordered_double, "bool")

    def ordered(props: Mapping[str, str]) -> Value:
        text = inner(props)
        if text is None:
            return None
        return test(_cmp(convert(text), constant))  # type: ignore[arg-type]
    return _Node(ordered, "bool")


def _not(node: _Node) -> _Node:
    inner = node.evaluate

    def negation(props: Mapping[str, str]) -> Value:
        value = inner(props)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise _EvalError("ClassCastException: not a Boolean")
        return not value
    return _Node(negation, "bool")


_ORDERED = {
    "gt": lambda c: c > 0, "ge": lambda c: c >= 0, "lt": lambda c: c < 0, "le": lambda c: c <= 0,
}


def _ordered(op: str, left: _Node, right: _Node) -> _Node:
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    if left.kind == "prop" and right.kind == "const":
        return _ordered_property_constant(op, left, right.value)
    le, re_, test = left.evaluate, right.evaluate, _ORDERED[op]

    def ordered(props: Mapping[str, str]) -> Value:
        lv = le(props)
        if lv is None:
            return None
        rv = re_(props)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            return test(_compare_double(java_parse_double(lv), java_parse_double(rv)))
        return test(java_compare(lv, rv))
    return _Node(ordered, "bool")


def _boolean_of(value: Value) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise _EvalError("ClassCastException: not a Boolean")


def _and(left: _Node, right: _Node) -> _Node:
    le, re_ = left.evaluate, right.evaluate

    def conjunction(props: Mapping[str, str]) -> Value:
        lv = _boolean_of(le(props))
        if lv is False:
            return False
        rv = _boolean_of(re_(props))
        if rv is False:
            return False
        return None if lv is None or rv is None else True
    return _Node(conjunction, "bool")


def _or(left: _Node, right: _Node) -> _Node:
    le, re_ = left.evaluate, right.evaluate

    def disjunction(props: Mapping[str, str]) -> Value:
        lv = _boolean_of(le(props))
        if lv is True:
            return True
        rv = _boolean_of(re_(props))
        if rv is True:
            return True
        return None if lv is None or rv is None else False
    return _Node(disjunction, "bool")


def _in(left: _Node, strings: list[str], negated: bool) -> _Node:
    if left.kind != "prop":
        raise FilterExpressionError("Expected a property for In expression")
    inner, members = left.evaluate, frozenset(strings)

    def membership(props: Mapping[str, str]) -> Value:
        value = inner(props)
        if type(value) is not str:
            return None
        return (value in members) != negated
    return _Node(membership, "bool")


def _negate(node: _Node) -> _Node:
    inner = node.evaluate

    def negation(props: Mapping[str, str]) -> Value:
        value = inner(props)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return JavaInt(-value) if isinstance(value, JavaInt) else -value
    return _Node(negation, "other")


def _decimal(text: str) -> _Node:
    digits = text[:-1] if text[-1] in "lL" else text
    value = int(digits)
    if value > _LONG_MAX:
        raise FilterExpressionError(f"For input string: {digits!r}")
    return _constant(JavaInt(value) if value <= _INT_MAX else value)


def _float(text: str) -> _Node:
    value = float(text)
    if value > 1.7976931348623157e308:
        raise FilterExpressionError(f"{text} is greater than {1.7976931348623157e308}")
    if value < _DOUBLE_MIN_POSITIVE:
        raise FilterExpressionError(f"{text} is less than {_DOUBLE_MIN_POSITIVE}")
    return _constant(value)


def _string(token: str) -> str:
    return token[1:-1].replace("''", "'")


def _property(name: str) -> _Node:
    return _Node(lambda props: props.get(name), "prop")


def _build(tree: Tree | Token) -> _Node:
    from lark import Token, Tree
    if isinstance(tree, Token):
        raise FilterExpressionError(f"unexpected token {tree!s}")
    rule, children = tree.data, tree.children
    nodes = [c for c in children if isinstance(c, Tree)]
    if rule == "string":
        return _constant(_string(str(children[0])))
    if rule == "decimal":
        return _decimal(str(children[0]))
    if rule == "float_":
        return _float(str(children[0]))
    if rule in ("true", "false", "null"):
        return _constant({"true": True, "false": False, "null": None}[rule], "bool_const")
    if rule == "prop":
        return _property(str(children[0]))
    if rule in ("in_", "not_in"):
        strings = [_string(str(t)) for t in nodes[1].children]
        return _in(_build(nodes[0]), strings, rule == "not_in")
    built = [_build(n) for n in nodes]
    if rule == "negate":
        return _negate(built[0])
    if rule == "not_":
        return _not(_as_boolean(built[0]))
    if rule == "or_":
        return _or(_as_boolean(built[0]), _as_boolean(built[1]))
    if rule == "and_":
        return _and(_as_boolean(built[0]), _as_boolean(built[1]))
    if rule in ("eq", "ne"):
        _check_equal_operands(built[0], built[1])
        equal = _equal(built[0], built[1])
        return equal if rule == "eq" else _not(equal)
    if rule in ("is_null", "is_not_null"):
        equal = _equal(built[0], _constant(None, "bool_const"))
        return equal if rule == "is_null" else _not(equal)
    if rule in _ORDERED:
        return _ordered(rule, built[0], built[1])
    if rule in ("between", "not_between"):
        value, low, high = built
        if rule == "not_between":
            return _or(_ordered("lt", value, low), _ordered("gt", value, high))
        if low.kind in ("const", "bool_const") and high.kind in ("const", "bool_const"):
            if low.value is None or high.value is None:
                raise FilterExpressionError("Illegal values of between, values can not be null!")
            try:
                order = java_compare(high.value, low.value)
            except _EvalError as exc:
                raise FilterExpressionError(str(exc)) from None
            if order < 0:
                raise FilterExpressionError(
                    f"Illegal values of between, left value({low.value}) must less than or "
                    f"equal to right value({high.value})")
        return _and(_ordered("ge", value, low), _ordered("le", value, high))
    raise FilterExpressionError(f"unexpected rule {rule}")


def _parse_prefix(expression: str) -> Tree:
    """The longest prefix the grammar completes, as JavaCC's SelectorParser (which has no
    EOF rule) reads it: the tokens after the first one that cannot continue are not read."""
    from lark.exceptions import LarkError
    parser = _parser()
    state = parser.parse_interactive("")
    for token in parser.lex(expression):
        trial = state.copy()
        try:
            trial.feed_token(token)
        except LarkError:
            if state.copy().accepts() & {"$END"}:
                break
            raise FilterExpressionError(
                f"unexpected {token!s} at column {token.column}") from None
        state = trial
    try:
        return state.feed_eof()
    except LarkError:
        raise FilterExpressionError("unexpected end of the expression") from None


@dataclass(frozen=True)
class Sql92Filter:
    """A compiled SQL92 expression; :meth:`matches` is what a broker's pull applies."""

    expression: str
    evaluate: Evaluator

    def matches(self, properties: Mapping[str, str] | None) -> bool:
        try:
            return self.evaluate(properties or {}) is True
        except _EvalError:
            return False


@functools.lru_cache(maxsize=1024)
def compile_sql92(expression: str) -> Sql92Filter:
    """The filter of an expression; FilterExpressionError (naming it) when RocketMQ's parser
    refuses it. Each distinct expression is compiled once."""
    if not isinstance(expression, str):
        raise TypeError(f"SQL92 expression must be a str, got {type(expression).__name__}")
    from lark.exceptions import LarkError
    try:
        tree = _parse_prefix(expression)
        node = _as_boolean(_build(tree))
    except (LarkError, FilterExpressionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FilterExpressionError(f"Invalid MessageSelector {quote(expression)}: {reason}") from None
    return Sql92Filter(expression, node.evaluate)
