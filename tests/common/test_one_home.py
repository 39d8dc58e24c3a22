"""The record magic codes and the system topic names have one home, rocketstore/common/: no
numeric or quoted string literal of them anywhere else in rocketstore/ (Python, Cython
sources and stubs). Comments and docstrings may name them."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rocketstore"
HOME = PACKAGE / "common"
SUFFIXES = (".py", ".pyx", ".pxd", ".pyi")

MAGIC_CODES = (0xDAA320A7, 0xDAA320AB, 0xCBD43194)
#: the codes as any source may spell them: hex in any case, unsigned and signed decimal (Java's
#: int), and as escaped bytes
_NUMBER_SPELLINGS = {str(code) for code in MAGIC_CODES} | {
    str(code - 2**32) for code in MAGIC_CODES}
_HEX = re.compile(r"\b0[xX]([0-9a-fA-F]+)\b")
_DECIMAL = re.compile(r"(?<![\w.])-?\s*[0-9]+\b")
_ESCAPED = re.compile("|".join(
    re.escape("".join(f"\\x{b:02x}" for b in code.to_bytes(4, "big")[:2])) for code in MAGIC_CODES),
    re.IGNORECASE)
#: a string literal of a system topic (or the start of one: prefixes, RMQ_SYS_*)
_TOPIC = re.compile(r"^(SCHEDULE_TOPIC_XXXX|TBW102|%RETRY%|%DLQ%|RMQ_SYS_|OFFSET_MOVED_EVENT$"
                    r"|SELF_TEST_TOPIC$|TRANS_CHECK_MAX_TIME_TOPIC$)")

_TOKEN = re.compile(r"""
    (?P<comment>\#[^\n]*)
  | (?P<triple>'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\")
  | (?P<string>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")
  | (?P<code>[^#'"]+)
""", re.VERBOSE | re.DOTALL)


def tokens(text: str) -> Iterator[tuple[str, str, int]]:
    """(kind, text, first line) of code, string literals (without their prefix letters, which
    end the code before them) and comments; triple-quoted strings (docstrings, prose) are kind
    "triple" and not checked."""
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:       # an unterminated quote: the rest of the line is code
            end = text.find("\n", pos) + 1 or len(text)
            yield "code", text[pos:end], text.count("\n", 0, pos) + 1
            pos = end
            continue
        kind = match.lastgroup
        assert kind is not None
        yield kind, match.group(), text.count("\n", 0, pos) + 1
        pos = match.end()


def literals_of_the_vocabulary(text: str) -> list[str]:
    found = []
    for kind, token, line in tokens(text):
        if kind == "code":
            for m in _HEX.finditer(token):
                if int(m.group(1), 16) in MAGIC_CODES:
                    found.append(f"{line + token.count(chr(10), 0, m.start())}: {m.group()}")
            for m in _DECIMAL.finditer(token):
                if re.sub(r"\s", "", m.group()) in _NUMBER_SPELLINGS:
                    found.append(f"{line + token.count(chr(10), 0, m.start())}: {m.group()}")
        elif kind == "string":
            body = token[1:-1]
            if _TOPIC.match(body) or _ESCAPED.search(body):
                found.append(f"{line}: {token}")
    return found


def test_the_scanner_finds_what_it_looks_for() -> None:
    text = '''x = 0xdaa320a7\ny = -626843481  # 0xCBD43194 in a comment\n"""SCHEDULE_TOPIC_XXXX"""
t = "SCHEDULE_TOPIC_XXXX"\np = f"%RETRY%{g}"\nq = b"\\xda\\xa3"\ns = "RMQ_SYS_TRACE_TOPIC"
ok = "CID_RMQ_SYS_TRANS"\nn = 3668123815\nm = MAGIC  # TBW102\n'''
    assert [hit.split(":")[0] for hit in literals_of_the_vocabulary(text)] == [
        "1", "2", "4", "5", "6", "7", "9"]


def test_magic_codes_and_system_topics_live_only_in_common() -> None:
    hits = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in SUFFIXES or HOME in path.parents:
            continue
        for hit in literals_of_the_vocabulary(path.read_text(encoding="utf-8")):
            hits.append(f"{path.relative_to(PACKAGE)}:{hit}")
    assert hits == []
