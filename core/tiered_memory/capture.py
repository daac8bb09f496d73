"""Capture rules: which memory type a piece of text is, and what of a conversation is
worth keeping. One word list, used by every face that captures (the LangChain agent
middleware, the LlamaIndex memory block) and by note import (`transfer.detect_type`,
the CLI's `add`), so one sentence gets one type wherever it is captured.

The type sets how fast a memory fades (`DecayPolicy`), so the rules are simple and
predictable rather than clever, and a caller replaces them with its own `TypeRule`s:

- procedural, how the user wants things done: "always", "never", "prefer", "should",
  "must", "avoid", "don't", "make sure", "remember to", or a note that starts with an
  instruction ("Use uv", "Run the tests"). "Remember that ..." states a fact, and
  "Let me ..." is an assistant talking about itself, so neither opens an instruction.
- episodic, what happened when: a date (2024-05-01, 3/5/24, March 3rd, 12 June) or a
  time word (yesterday, tonight, two years ago, last week, this morning, on Monday).
- factual: a statement of what is (is, are, was, called, named, lives, works, has).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .models import MemoryType

_RULE_WORDS = (
    r"\b(?:always|never|prefers?|preferred|should|must|avoid|don'?t|do\s+not|make\s+sure"
    r"|remember\s+to)\b"
)
# Verbs a note starts with when it tells the agent what to do (past markup: **Run**).
_IMPERATIVES = (
    r"use|run|call|check|ask|keep|write|read|install|set|add|remove|avoid|prefer|ensure"
    r"|make|put|send|reply|respond|answer|format|follow|start|stop|try|test|build|deploy"
    r"|commit|push|open|close|create|delete|save|store|mention|include|skip|give|tell"
    r"|show|explain|summarize|summarise|cite|double-check|confirm|wait"
)
PROCEDURAL = rf"{_RULE_WORDS}|^[\W_]*(?:{_IMPERATIVES})(?![\w'-])"

_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
EPISODIC = (
    r"\b(?:\d{4}-\d{2}-\d{2}|\d{4}/\d{1,2}/\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}"
    rf"|{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?(?:,?\s+\d{{4}})?"
    r"|yesterday|today|tonight|tomorrow|ago"
    rf"|last\s+(?:night|week|month|year|{_WEEKDAY})"
    r"|this\s+(?:morning|afternoon|evening|week)"
    rf"|(?:on|next)\s+{_WEEKDAY})\b"
)
FACTUAL = r"\b(?:is|are|was|were|am|called|named|lives?|works?|has|have)\b"


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {e}") from e
    return pattern


class TypeRule(BaseModel):
    """Text matching `pattern` (a case-insensitive regex) is of `memory_type`."""

    model_config = ConfigDict(frozen=True)

    memory_type: MemoryType
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _valid(cls, v: str) -> str:
        return _compiles(v)


DEFAULT_TYPE_RULES: tuple[TypeRule, ...] = (
    TypeRule(memory_type=MemoryType.PROCEDURAL, pattern=PROCEDURAL),
    TypeRule(memory_type=MemoryType.EPISODIC, pattern=EPISODIC),
    TypeRule(memory_type=MemoryType.FACTUAL, pattern=FACTUAL),
)

DEFAULT_SKIP_PATTERNS: tuple[str, ...] = (
    # requests to the assistant, memory commands included: acted on, not facts
    r"^(?:please\s+)?(?:can|could|would|will) you\b",
    r"^(?:please\s+)?(?:pin|unpin|forget|restore|promote|demote|remind|tell|show)\b",
    # chit-chat, and the assistant talking about itself or its uncertainty
    r"^(?:got it|thanks|thank you|noted|sure|okay|ok|hello|hi|hey|let me)\b",
    r"\bI (?:don't|do not|didn't) (?:know|remember|have)\b",
    r"\bI(?:'m| am) not sure\b",
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


class Capture(BaseModel):
    """One sentence a finished turn offers to long-term memory."""

    content: str
    memory_type: MemoryType
    role: str


class CaptureRules(BaseModel):
    """What of a finished turn is worth keeping, and as which memory type.

    A sentence is kept when it is a statement (not a question), has at least
    `min_words` words, matches none of `skip_patterns` (requests, memory commands,
    chit-chat), and matches one of `type_rules` (first match wins). A user sentence
    matching no type rule is kept as `default_type`, or dropped when that is None. An
    assistant sentence must match a type rule, and is dropped when it only restates a
    memory injected for this turn: repeating what was recalled is not a new conclusion.
    """

    model_config = ConfigDict(frozen=True)

    type_rules: tuple[TypeRule, ...] = DEFAULT_TYPE_RULES
    skip_patterns: tuple[str, ...] = DEFAULT_SKIP_PATTERNS
    default_type: MemoryType | None = MemoryType.EPISODIC
    capture_user: bool = True
    capture_assistant: bool = True
    min_words: int = Field(default=3, ge=1)
    max_chars: int = Field(default=1000, ge=1)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    """Importance of captured memories; None keeps the memory policy's default."""

    @field_validator("skip_patterns")
    @classmethod
    def _all_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            _compiles(pattern)
        return patterns

    def detect_type(self, text: str) -> MemoryType | None:
        """The type of the first rule `text` matches, or None."""
        for rule in self.type_rules:
            if re.search(rule.pattern, text, flags=re.IGNORECASE):
                return rule.memory_type
        return None

    def sentences(self, text: str) -> list[str]:
        """Statements of `text` long enough to mean something on their own."""
        out: list[str] = []
        for raw in _SENTENCE_END.split(text):
            sentence = raw.strip()
            if not sentence or sentence.endswith("?") or len(sentence) > self.max_chars:
                continue
            if len(sentence.split()) < self.min_words:
                continue
            if any(re.search(p, sentence, flags=re.IGNORECASE) for p in self.skip_patterns):
                continue
            out.append(sentence)
        return out

    def capture(
        self, user: str | None, assistant: str | None = None, recalled: str = ""
    ) -> list[Capture]:
        """The captures of one turn: `user` is what the user said, `assistant` the final
        answer (not tool calls or their results), `recalled` the memory text injected
        for the turn (lines "- ...")."""
        captures: list[Capture] = []
        if self.capture_user and user:
            for sentence in self.sentences(user):
                kind = self.detect_type(sentence) or self.default_type
                if kind is not None:
                    captures.append(Capture(content=sentence, memory_type=kind, role="user"))
        if self.capture_assistant and assistant:
            known = [_normal(line[2:]) for line in recalled.splitlines() if line.startswith("- ")]
            for sentence in self.sentences(assistant):
                kind = self.detect_type(sentence)
                restated = any(k and k in _normal(sentence) for k in known)
                if kind is not None and not restated:
                    captures.append(Capture(content=sentence, memory_type=kind, role="assistant"))
        return captures


DEFAULT_RULES = CaptureRules()


def detect_type(
    text: str,
    *,
    dated_context: bool = False,
    project: bool = False,
    rules: CaptureRules = DEFAULT_RULES,
) -> MemoryType:
    """The type of a note (markdown import, `tiered-memory add`): the rules' type, where
    a dated file or section makes a note episodic and a project heading makes it
    project; factual when nothing else applies. An instruction stays procedural in any
    context."""
    kind = rules.detect_type(text)
    if kind is MemoryType.PROCEDURAL:
        return kind
    if dated_context or kind is MemoryType.EPISODIC:
        return MemoryType.EPISODIC
    if project:
        return MemoryType.PROJECT
    return kind or MemoryType.FACTUAL


def _normal(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .!")


__all__ = [
    "DEFAULT_RULES",
    "DEFAULT_SKIP_PATTERNS",
    "DEFAULT_TYPE_RULES",
    "Capture",
    "CaptureRules",
    "TypeRule",
    "detect_type",
]
