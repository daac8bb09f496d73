"""Stored text made safe to print on a terminal.

A memory's content is anyone's text: a chat turn, a web page, an imported file.
Printed as it is, its control characters are commands to the terminal: ESC starts
sequences that retitle the window (OSC 0), clear the screen, move the cursor, write
the clipboard (OSC 52) or make links (OSC 8); a C1 character such as U+009B does the
same in one character on some terminals; CR returns to the start of the line and
lets the rest overwrite what was printed. The bidirectional controls (U+202A-U+202E,
U+2066-U+2069, the marks U+200E, U+200F and U+061C) command no terminal but reorder
what it shows: "Trojan Source" text whose displayed order differs from its stored one,
so a memory can look like another, or hide the end of a line. So every command that
prints stored text shows these characters as escapes instead (`\\x1b`, `\\u202e`),
and JSON output escapes them too (`\\u001b`), where json.dumps leaves DEL, the C1
range and the bidi controls raw.
"""

from __future__ import annotations

import re

# The bidirectional formatting characters (Unicode's Bidi_Control property).
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 controls but tab and newline, DEL, the C1 controls and the bidi controls.
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
_CONTROL_OR_NEWLINE = re.compile(f"[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f{_BIDI}]")
_JSON_RAW = re.compile(f"[\\x7f-\\x9f{_BIDI}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """`text` with every control character shown as `\\xNN`; tabs stay, and newlines
    too unless `newlines=False` (one-line output such as an error message)."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    return pattern.sub(_escaped, text)


def json_printable(document: str) -> str:
    """JSON text (from json.dumps) with DEL, the C1 and the bidi controls written as
    `\\uNNNN` escapes: the same JSON value, nothing a terminal acts on. (json.dumps already
    escapes the C0 controls; these characters only occur inside its strings.)"""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
