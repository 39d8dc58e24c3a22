"""The record magic codes, the system topic names and the message property names have one home,
rocketstore/common/: no numeric or quoted string literal of them anywhere else in rocketstore/
(Python, Cython sources and stubs; native code reads the names from the header setup.py
generates). Comments and docstrings may name them."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from rocketstore.common.properties import SYSTEM_PROPERTIES, MessageProperty

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

#: every well-known property name, alone or with its name-value separator (b"DELAY\x01")
PROPERTY_NAMES = SYSTEM_PROPERTIES | {
    value for name, value in vars(MessageProperty).items() if not name.startswith("_")}
_PROPERTY = re.compile("(" + "|".join(map(re.escape, sorted(PROPERTY_NAMES))) + r")(\\x01)?")

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
            if _TOPIC.match(body) or _ESCAPED.search(body) or _PROPERTY.fullmatch(body):
                found.append(f"{line}: {token}")
    return found


def test_the_scanner_finds_what_it_looks_for() -> None:
    text = '''x = 0xdaa320a7\ny = -626843481  # 0xCBD43194 in a comment\n"""SCHEDULE_TOPIC_XXXX"""
t = "SCHEDULE_TOPIC_XXXX"\np = f"%RETRY%{g}"\nq = b"\\xda\\xa3"\ns = "RMQ_SYS_TRACE_TOPIC"
ok = "CID_RMQ_SYS_TRANS"\nn = 3668123815\nm = MAGIC  # TBW102\nk = b"UNIQ_KEY"\nd = b"DELAY\\x01"
fine = "KEYSTONE", "TAGS_"\n'''
    assert [hit.split(":")[0] for hit in literals_of_the_vocabulary(text)] == [
        "1", "2", "4", "5", "6", "7", "9", "11", "12"]


def test_the_vocabulary_lives_only_in_common() -> None:
    hits = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in SUFFIXES or HOME in path.parents:
            continue
        for hit in literals_of_the_vocabulary(path.read_text(encoding="utf-8")):
            hits.append(f"{path.relative_to(PACKAGE)}:{hit}")
    assert hits == []


#: a sysFlag masked with a number (``sys_flag & 0xF``, ``batch.sys_flags & 0xC``) instead of
#: rocketstore.common.record's names
_SYS_FLAG_MASK = re.compile(r"sys_?flags?\b[\w\[\].]*\s*\)?\s*&\s*~?\s*\(?\s*(0[xX][0-9a-fA-F]+|[0-9]+)\b",
                            re.IGNORECASE)


def sys_flag_masks(text: str) -> list[str]:
    return [f"{line + token.count(chr(10), 0, m.start())}: {m.group()}"
            for kind, token, line in tokens(text) if kind == "code"
            for m in _SYS_FLAG_MASK.finditer(token)]


def test_the_sys_flag_scanner_finds_what_it_looks_for() -> None:
    text = ("a = stored.sys_flag & 0xF\nb = (batch.sys_flags & 0xC)\nc = sys_flags[i] & 12\n"
            "d = msg.sys_flag & MESSAGE_SYS_FLAGS\ne = sys_flag & ~0xF\n# sys_flag & 0x4\n")
    assert [hit.split(":")[0] for hit in sys_flag_masks(text)] == ["1", "2", "3", "5"]


def test_sys_flag_bits_are_named() -> None:
    hits = [f"{path.relative_to(PACKAGE)}:{hit}"
            for path in sorted(PACKAGE.rglob("*"))
            if path.suffix in SUFFIXES and HOME not in path.parents
            for hit in sys_flag_masks(path.read_text(encoding="utf-8"))]
    assert hits == []
