"""LoCoMo conversations as the quality benchmark sees them (see the data folder's README).

One memory per turn: "Speaker: text", plus " [shares a photo: caption]" when the turn
has a caption, created at its session's time. Questions of category 5 (adversarial,
unanswerable) are left out; evidence ids are normalised ("D:11:26" -> "D11:26",
"D8:6; D9:17" -> two ids) and ids that name no turn are dropped (and counted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass
class Turn:
    dia_id: str
    content: str
    session: int
    when: datetime


@dataclass
class Question:
    text: str
    evidence: list[str]
    category: int


@dataclass
class Conversation:
    id: str
    sessions: list[tuple[int, datetime, list[Turn]]]
    questions: list[Question]
    dropped_evidence: int = 0
    turns: list[Turn] = field(default_factory=list)

    @property
    def last_time(self) -> datetime:
        return self.sessions[-1][1]


def parse_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware UTC datetime."""
    parsed = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return parsed.replace(tzinfo=timezone.utc)


def memory_text(turn: dict[str, str]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    numbers = sorted(
        int(m.group(1))
        for key in data
        if (m := _SESSION.fullmatch(key)) and isinstance(data[key], list) and data[key]
    )
    sessions: list[tuple[int, datetime, list[Turn]]] = []
    for n in numbers:
        when = parse_time(data[f"session_{n}_date_time"])
        turns = [Turn(t["dia_id"], memory_text(t), n, when) for t in data[f"session_{n}"]]
        sessions.append((n, when, turns))
    sessions.sort(key=lambda s: s[1])
    turns = [t for _, _, ts in sessions for t in ts]
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    dropped = 0
    for qa in data["qa"]:
        if int(qa["category"]) == 5:
            continue
        evidence: list[str] = []
        for raw in qa.get("evidence", []):
            for m in _EVIDENCE.finditer(str(raw)):
                dia = f"D{m.group(1)}:{m.group(2)}"
                if dia in known and dia not in evidence:
                    evidence.append(dia)
                elif dia not in known:
                    dropped += 1
        if evidence:
            questions.append(Question(str(qa["question"]), evidence, int(qa["category"])))
    return Conversation(path.stem, sessions, questions, dropped, turns)


def load(folder: Path) -> list[Conversation]:
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SystemExit(f"no LoCoMo conversations (*.json) in {folder}")
    return [load_conversation(f) for f in files]
