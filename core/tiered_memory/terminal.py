"""Stored text made safe to print on a terminal.

A memory's content is anyone's text: a chat turn, a web page, an imported file.
Printed as it is, its control characters are commands to the terminal: ESC starts
sequences that retitle the window (OSC 0), clear the screen, move the cursor, write
the clipboard (OSC 52) or make links (OSC 8); a C1 character such as U+009B does the
same in one character on some terminals; CR returns to the start of the line and
lets the rest overwrite what was printed. So every command that prints stored text
shows these characters as escapes instead (`\\x1b`), and JSON output escapes them
too (`\\u001b`), where json.dumps leaves DEL and the C1 range raw.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, and the C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_JSON_RAW = re.compile(r"[\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """`text` with every control character shown as `\\xNN`; tabs stay, and newlines
    too unless `newlines=False` (one-line output such as an error message)."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    return pattern.sub(_escaped, text)


def json_printable(document: str) -> str:
    """JSON text (from json.dumps) with DEL and the C1 controls written as `\\u00NN`
    escapes: the same JSON value, nothing a terminal acts on. (json.dumps already
    escapes the C0 controls; these characters only occur inside its strings.)"""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
