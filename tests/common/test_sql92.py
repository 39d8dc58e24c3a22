"""SQL92 filter expressions: RocketMQ 4.9's grammar and semantics, table-driven (every row
agrees with 4.9.8's own parser: tests/java/test_java_sql92.py runs the table through it), and
property-tested against the separately written reference evaluator (tests/reference)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sql92_reference import random_expression, random_properties, reference_match

from rocketstore.common.sql92 import FilterExpressionError, compile_sql92

REFUSED = "refused"

#: (expression, properties, expected: True / False / REFUSED)
TABLE: list[tuple[str, dict[str, str], object]] = [
    # comparisons with numbers: the property's string is converted
    ("a > 5", {"a": "6"}, True),
    ("a > 5", {"a": "5"}, False),
    ("a >= 5", {"a": "5"}, True),
    ("a < 5", {"a": "-7"}, True),
    ("a <= 5", {"a": "5"}, True),
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "05"}, True),
    ("a = 5", {"a": "+5"}, True),
    ("a = 5", {"a": "5.0"}, False),            # Integer.valueOf("5.0") fails
    ("a = 5.0", {"a": "5"}, True),              # Double.valueOf
    ("a > 5", {"a": " 7 "}, False),             # Integer.valueOf does not trim
    ("a > 1.5", {"a": " 7 "}, True),            # Double.valueOf does
    ("a > 5", {"a": "3000000000"}, False),     # beyond int: the Integer conversion fails
    ("a > 3000000000", {"a": "3000000001"}, True),
    ("a > 5", {"a": "abc"}, False),
    ("a <> 5", {"a": "abc"}, False),            # NOT(exception) is no match either
    ("a > 1.5", {"a": "NaN"}, True),            # Double.compareTo puts NaN on top
    ("a = 5L", {"a": "5"}, True),
    ("a > 1e3", {"a": "1001"}, True),
    ("a > .5", {"a": "1"}, True),
    ("a > -5", {"a": "-4"}, True),
    ("5 = a", {"a": "5"}, True),
    ("1.5 < a", {"a": "2"}, True),
    # two properties: equality as strings, order as doubles
    ("a = b", {"a": "x", "b": "x"}, True),
    ("a = b", {"a": "5", "b": "5.0"}, False),
    ("a > b", {"a": "2.5", "b": "1e0"}, True),
    ("a > b", {"a": "x", "b": "y"}, False),
    # strings: equality only
    ("a = 'x'", {"a": "x"}, True),
    ("a <> 'x'", {"a": "y"}, True),
    ("a = 'it''s'", {"a": "it's"}, True),
    ("a > 'x'", {"a": "y"}, REFUSED),
    # BETWEEN, NOT BETWEEN
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a BETWEEN 1 AND 3", {"a": "4"}, False),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
    ("a NOT BETWEEN 1 AND 3", {}, False),
    ("a BETWEEN 3 AND 1", {"a": "2"}, REFUSED),
    ("a NOT BETWEEN 3 AND 1", {"a": "2"}, True),   # only BETWEEN checks its bounds
    ("a BETWEEN 'x' AND 'y'", {"a": "x"}, REFUSED),
    ("a BETWEEN 1 AND 1.5", {"a": "1"}, True),
    ("a BETWEEN 1 AND 1.5", {"a": "1.2"}, False),    # a >= 1 converts "1.2" as an Integer
    # IN, NOT IN: string literals, a property on the left
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a IN ('x', 'y', 'z', 'w', 'v')", {"a": "v"}, True),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a NOT IN ('x', 'y')", {}, False),
    ("a IN (1)", {"a": "1"}, REFUSED),
    ("5 IN ('a')", {}, REFUSED),
    # NULL: a missing property
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": ""}, False),
    ("a IS NOT NULL", {"a": "x"}, True),
    ("a = 'x'", {}, False),
    ("a <> 'x'", {}, False),
    ("'x' <> a", {}, True),                      # 'x' = null is FALSE, not NULL
    ("a > 5 OR b = 'y'", {"b": "y"}, True),
    ("a > 5 AND b = 'y'", {"b": "y"}, False),
    ("NOT (a > 5)", {}, False),
    ("a = NULL", {}, REFUSED),
    ("TRUE AND NULL", {}, False),
    ("NULL OR TRUE", {}, True),
    # booleans
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("a = TRUE", {"a": "TrUe"}, True),
    ("a = FALSE", {"a": "anything"}, True),
    ("a", {"a": "true"}, False),                 # a property on its own is FALSE
    ("NOT a", {"a": "x"}, True),
    ("NOT a", {}, False),
    ("1 = TRUE", {}, False),
    ("TRUE = 1", {}, REFUSED),
    ("TRUE = TRUE", {}, True),
    # precedence: NOT binds tighter than comparisons, AND tighter than OR
    ("a = 1 OR b = 2 AND c = 3", {"a": "1"}, True),
    ("(a = 1 OR b = 2) AND c = 3", {"a": "1"}, False),
    ("NOT a = 'x'", {"a": "y"}, False),          # (NOT a) = 'x'
    ("NOT (a = 'x')", {"a": "y"}, True),
    ("a BETWEEN 1 AND 3 AND b = 'x'", {"a": "2", "b": "x"}, True),
    # TAGS and other system properties are properties like any other
    ("TAGS = 'tagA'", {"TAGS": "tagA"}, True),
    ("TAGS IN ('tagA', 'tagB') AND KEYS IS NOT NULL", {"TAGS": "tagB", "KEYS": "k"}, True),
    # keywords in any case, identifiers as written
    ("a between 1 and 3 or b is null", {"a": "9"}, True),
    ("A = 'x'", {"a": "x"}, False),
    ("ANDY = 'x'", {"ANDY": "x"}, True),
    ("$x = 'y' AND _a_1 = 'z'", {"$x": "y", "_a_1": "z"}, True),
    # comments, and what follows a complete expression (ignored, as 4.9.8's parser does)
    ("/* c */ a = 1 -- done\n", {"a": "1"}, True),
    ("a = 'x' trailing words", {"a": "x"}, True),
    ("a LIKE 'x%'", {"a": "xyz"}, False),        # no LIKE: this is "a", FALSE
    # refused expressions
    ("", {}, REFUSED),
    ("a >", {}, REFUSED),
    ("(a = 1", {}, REFUSED),
    ("5", {}, REFUSED),
    ("'x'", {}, REFUSED),
    ("NOT 5", {}, REFUSED),
    ("a NOT 5", {}, REFUSED),
    ("a # b", {}, REFUSED),
    ("a = 'x' #", {}, REFUSED),                  # the token after the end is still read
    ("(a > 1) > 2", {}, REFUSED),
    ("0.0 < a", {}, REFUSED),                    # below Double.MIN_VALUE
    ("a > 1e400", {}, REFUSED),
    ("99999999999999999999 > a", {}, REFUSED),
    ("a = 'unterminated", {}, REFUSED),
    ("a IS 5", {}, REFUSED),
]


@pytest.mark.parametrize(("expression", "properties", "expected"), TABLE)
def test_rocketmq_semantics(expression: str, properties: dict[str, str], expected: object) -> None:
    if expected == REFUSED:
        with pytest.raises(FilterExpressionError):
            compile_sql92(expression)
    else:
        assert compile_sql92(expression).matches(properties) is expected


@pytest.mark.parametrize(("expression", "properties", "expected"), TABLE)
def test_the_reference_agrees_with_the_table(expression: str, properties: dict[str, str],
                                             expected: object) -> None:
    assert reference_match(expression, properties) == (None if expected == REFUSED else expected)


def test_an_expression_compiles_once_and_errors_name_it() -> None:
    assert compile_sql92("a > 5") is compile_sql92("a > 5")
    with pytest.raises(FilterExpressionError, match=r"'a >'.*end of the expression"):
        compile_sql92("a >")
    with pytest.raises(FilterExpressionError, match="unexpected 1 at column 7"):
        compile_sql92("a IN (1)")
    with pytest.raises(TypeError):
        compile_sql92(5)  # type: ignore[arg-type]
    assert compile_sql92("a = 1").matches(None) is False


@settings(max_examples=600, deadline=None)
@given(st.randoms(use_true_random=False))
def test_random_expressions_match_the_reference_evaluator(rng: random.Random) -> None:
    expression = random_expression(rng)
    for _ in range(4):
        properties = random_properties(rng)
        expected = reference_match(expression, properties)
        try:
            got: bool | None = compile_sql92(expression).matches(properties)
        except FilterExpressionError:
            got = None
        assert got == expected, (expression, properties)
