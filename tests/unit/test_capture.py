"""The one word list of capture rules: a chat sentence, a flushed message and an imported
note get the same type (`tiered_memory.capture`), and each choice below is deliberate."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tiered_memory import MemoryType
from tiered_memory.capture import CaptureRules, TypeRule, detect_type

P, E, F = MemoryType.PROCEDURAL, MemoryType.EPISODIC, MemoryType.FACTUAL
CORE = Path(__file__).resolve().parents[2] / "core" / "tiered_memory"

# (text, its type by the rules, None when no rule matches)
WORD_LIST: list[tuple[str, MemoryType | None]] = [
    # procedural: how the user wants things done
    ("I always want answers in British English", P),
    ("Never deploy on Fridays", P),
    ("Sam prefers tea to coffee", P),
    ("Avoid jargon in summaries", P),
    ("Dont use tabs", P),
    ("Make sure the tests pass before merging", P),
    ("Remember to water the plants", P),
    ("Use uv, not pip, in this repo", P),  # an instruction: its first word
    ("**Run** the tests before pushing", P),  # past markdown markup
    ("double-check the invoice totals", P),
    # episodic: what happened when
    ("Yesterday I went hiking in the Alps", E),
    ("We moved house on 2025-11-02", E),
    ("The release happened on March 3rd", E),
    ("Flew to Lisbon on March 3rd, 2024", E),
    ("Dinner with Ana on 12 June", E),
    ("Paid the rent on 3/5/24", E),
    ("Moved to Leeds two years ago", E),
    ("Last night the heating failed", E),
    ("This morning the heating failed", E),
    ("Band practice on Tuesday went well", E),
    # factual: what is
    ("My daughter is called Ava", F),
    ("Our cats are named Miso and Tofu", F),
    ("Sam lives in Leeds", F),
    ("Remember that my daughter is called Ava", F),  # states a fact, not a rule
    # no rule: chat decides by role, notes fall back to factual
    ("Good morning to you", None),
    ("Let me check that for you", None),  # the assistant about itself
    ("User research ends soon", None),  # "Use" only as a whole word
]


@pytest.mark.parametrize(("text", "expected"), WORD_LIST)
def test_the_word_list(text: str, expected: MemoryType | None) -> None:
    assert CaptureRules().detect_type(text) is expected


@pytest.mark.parametrize(("text", "expected"), WORD_LIST)
def test_a_note_gets_the_same_type_or_factual(text: str, expected: MemoryType | None) -> None:
    assert detect_type(text) is (expected or F)


def test_a_notes_context_decides_what_the_words_leave_open() -> None:
    assert detect_type("Sam lives in Leeds", dated_context=True) is E
    assert detect_type("Sam lives in Leeds", project=True) is MemoryType.PROJECT
    assert detect_type("Met Bob on 2024-05-01", project=True) is E
    assert detect_type("Always run the linter", dated_context=True, project=True) is P


def test_custom_rules_replace_the_word_list() -> None:
    rules = CaptureRules(
        type_rules=(TypeRule(memory_type=MemoryType.PROJECT, pattern=r"\bsprint\b"),),
        default_type=None,
    )
    assert rules.detect_type("The sprint ends Friday") is MemoryType.PROJECT
    assert rules.detect_type("My daughter is called Ava") is None
    assert detect_type("My daughter is called Ava", rules=rules) is F
    assert detect_type("The sprint ends Friday", rules=rules) is MemoryType.PROJECT
    with pytest.raises(ValueError, match="pattern"):
        TypeRule(memory_type=MemoryType.FACTUAL, pattern="(unclosed")
    with pytest.raises(ValueError, match="regular expression"):
        CaptureRules(skip_patterns=("[",))


def test_a_turn_keeps_statements_and_drops_requests_chit_chat_and_restatements() -> None:
    captures = CaptureRules().capture(
        user="Please pin my preference for tea. My son is called Leo. What is his age? Hi!",
        assistant="Leo is a lovely name. Let me know if you need more. Tea is pinned now.",
        recalled="- Leo is a lovely name",
    )
    assert [(c.role, c.content, c.memory_type) for c in captures] == [
        ("user", "My son is called Leo.", F),
        ("assistant", "Tea is pinned now.", F),
    ]


def test_only_the_capture_module_holds_the_rule_words() -> None:
    """No other core module restates the procedural word list (it was written twice,
    differently). The time words of `cues` are a retrieval signal, not a type rule."""
    for path in CORE.rglob("*.py"):
        if path.name == "capture.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert "prefers?" not in node.value, path
