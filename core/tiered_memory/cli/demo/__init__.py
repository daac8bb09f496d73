"""`tiered-memory demo`: a few months of one user's conversation, played on a fresh
embedded store with a simulated clock (the script ships as package data)."""

from .player import run_demo

__all__ = ["run_demo"]
