"""Archived originals in S3-compatible object storage (extra `[s3]`)."""

from .objects import S3ObjectStore

__all__ = ["S3ObjectStore"]
