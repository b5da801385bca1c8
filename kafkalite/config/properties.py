"""Java ``.properties`` parsing, with the exact rules of ``java.util.Properties.load``.

Kafka reads ``server.properties`` through ``Properties.load``, so a file a user copies from a Kafka
install must mean the same thing here: comment lines (``#``/``!``), ``key=value`` / ``key: value``
/ ``key value``, backslash line continuations, and Java's escapes (``\\t \\n \\r \\f \\uXXXX``, any
other ``\\c`` is ``c``). Like Java, values keep trailing whitespace (an escaped ``\\ `` is how a
user asks for it); Kafka's ``ConfigDef`` trims values when it interprets them, and so does
``server_config.build_config``.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Optional

__all__ = ["PropertiesSyntaxError", "java_trim", "parse_java_integer", "parse_properties", "store_properties"]

# Properties.load's whitespace; note: not '\v' nor Unicode spaces.
_WHITESPACE = " \t\f"
# Natural line terminators: \n, \r, \r\n (str.splitlines would also split on \v, \x1c, \u2028, ...).
_NATURAL_LINE_SPLIT = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


class PropertiesSyntaxError(ValueError):
    """A malformed ``\\uXXXX`` escape, the one thing ``Properties.load`` rejects."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text into ``{key: value}`` in file order; a repeated key keeps its
    first position and its last value (``Properties`` is a map, the last ``put`` wins)."""
    result: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        result[_unescape(raw_key, lineno)] = _unescape(raw_value, lineno)
    return result


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(first line number, logical line)`` with comments and blank lines dropped and
    continuations joined. Escapes are left in place for the key/value split."""
    parts: list[str] = []  # natural lines of the current logical line, continuation removed
    first = 0
    for lineno, natural in enumerate(_NATURAL_LINE_SPLIT.split(text), start=1):
        line = natural.lstrip(_WHITESPACE)  # also on continuation lines
        if not any(parts):
            # Nothing on this logical line yet (Java checks "len == 0", so this holds after a
            # continued backslash-only line too): blank lines and comments are skipped, and a
            # comment never continues even if it ends in a backslash.
            if not line or line[0] in "#!":
                parts = []
                continue
            first = first if parts else lineno
        if _ends_with_odd_backslashes(line):
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield first, "".join(parts)
        parts = []
    if parts:  # input ended on a continuation: Java drops the backslash and keeps the line
        yield first, "".join(parts)


def _ends_with_odd_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped '=', ':' or whitespace. Whitespace around the
    separator is skipped, and at most one '='/':' is consumed ("a==b" has the value "=b")."""
    n = len(line)
    key_end = n
    value_start = n
    has_separator = False
    escaped = False
    for i, c in enumerate(line):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "=:":
            key_end, value_start, has_separator = i, i + 1, True
            break
        elif c in _WHITESPACE:
            key_end, value_start = i, i + 1
            break
    while value_start < n:
        c = line[value_start]
        if c not in _WHITESPACE:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(raw: str, lineno: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # cannot happen after continuation handling; drop a lone backslash like Java
            break
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i:i + 4]
            if len(digits) != 4 or not all(d in _HEX for d in digits):
                raise PropertiesSyntaxError(lineno, "malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    # Java strings are UTF-16: a "\uD83D\uDE00" escape pair is one character. Recombine
    # surrogate pairs; a lone surrogate stays as it is.
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


# Integer.parseInt / Long.parseLong / Short.parseShort: an optional sign and decimal digits, no
# blanks, no '_'. A digit is what Character.digit(char, 10) reads: a Unicode decimal digit (Nd)
# that is one UTF-16 char, i.e. in the BMP ('\uff15' is 5; '\U0001d7ce' is two surrogates, neither
# a digit). Python's \d is Nd in every plane: the lookahead keeps it to the BMP (the two sets are
# the same 370 characters there, checked against Java 17's Character.digit).
_JAVA_INTEGER = re.compile(r"[+-]?(?:(?![\U00010000-\U0010ffff])\d)+")


def parse_java_integer(text: str, bits: Optional[int] = 32) -> Optional[int]:
    """`text` as Java's parseInt (bits 32), parseLong (64) or parseShort (16) reads it, or None
    where Java throws NumberFormatException (not a number, or outside the type's range). With
    bits None, the syntax alone is checked. Trim first where Kafka does (`java_trim`)."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    number = int(text)
    if bits is not None and not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        return None
    return number


def java_trim(value: str) -> str:
    """Java's String.trim(): strips only characters <= U+0020 at both ends (str.strip() takes
    more). ConfigDef trims every value this way before parsing it."""
    start, end = 0, len(value)
    while start < end and value[start] <= " ":
        start += 1
    while end > start and value[end - 1] <= " ":
        end -= 1
    return value[start:end]


def _save_convert(text: str, escape_space: bool) -> str:
    """Properties.saveConvert as store(Writer) uses it: backslash escapes for '\\\\', the
    separators and comment characters, \\t \\n \\r \\f and spaces (all of a key's, a value's
    leading one); other characters as they are (a Writer takes Unicode)."""
    out: list[str] = []
    for i, c in enumerate(text):
        if c == " ":
            out.append("\\ " if i == 0 or escape_space else " ")
        elif c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(c)])
        elif c in "=:#!":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def store_properties(props: dict[str, str], comments: str | None, date: str) -> str:
    """The text Properties.store(Writer, comments) writes for `props` (given in the order Java
    iterates them): the comment line (if any), '#' and the date, then key=value lines."""
    lines = [] if comments is None else ["#" + comments]
    lines.append("#" + date)
    lines += [f"{_save_convert(k, True)}={_save_convert(v, False)}" for k, v in props.items()]
    return "".join(line + "\n" for line in lines)
