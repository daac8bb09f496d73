"""Archived originals as files in a local folder."""

from .objects import LocalFolderObjectStore

__all__ = ["LocalFolderObjectStore"]
