"""The embedded ObjectStore: archived originals as files in a local folder.

Layout: `{root}/{encoded namespace}/{encoded key}.json`.

Names are encoded so that no namespace or key, however hostile, can leave the folder
or collide with another one:
- every character but `a-z`, `0-9`, `-` and `_` is percent-encoded as UTF-8 bytes with
  upper-case hex (so `.`, `/`, `%`, upper-case letters, spaces and unicode never appear
  raw). Distinct strings give distinct names, even on case-insensitive file systems;
- Windows device names (`con`, `nul`, ...) get their first letter encoded;
- a name longer than 120 characters becomes a readable prefix + `~` + the sha256 of
  the original (`~` never occurs in an encoded name), and the original key is kept in
  a `{name}.key` file beside the object so that `list()` can report it.

Writes are atomic and durable: a temporary file in the same folder is written,
fsynced, renamed over the target (`os.replace`), and the folder is fsynced. A reader
sees the old bytes or the new ones, never a mix, and a crash never leaves a torn
object. Blocking file work runs in a worker thread (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import TypeVar

from tiered_memory.errors import BackendUnavailableError, NotFoundError, ValidationError
from tiered_memory.models import ObjectInfo

SUFFIX = ".json"
KEY_SUFFIX = ".key"
R = TypeVar("R")
MAX_NAME = 120  # characters of an encoded name before it is hashed (file systems allow 255)
_PLAIN = re.compile(r"[a-z0-9_-]")
_WINDOWS_DEVICES = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{i}" for i in range(1, 10)}
    | {f"lpt{i}" for i in range(1, 10)}
)


def _escape(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode("utf-8"))


def encode_name(text: str, what: str = "key") -> str:
    """A file-name-safe, collision-free encoding of `text` (see the module docstring)."""
    if not isinstance(text, str) or not text:
        raise ValidationError(f"an object {what} must be a non-empty string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValidationError(f"object {what} is not valid Unicode (lone surrogate)") from e
    encoded = "".join(c if _PLAIN.fullmatch(c) else _escape(c) for c in text)
    if encoded in _WINDOWS_DEVICES:
        encoded = _escape(encoded[0]) + encoded[1:]
    if len(encoded) <= MAX_NAME:
        return encoded
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    prefix = encoded[:48]
    cut = prefix.rfind("%")
    if cut > len(prefix) - 3:  # never end the prefix inside an escape
        prefix = prefix[:cut]
    return f"{prefix}~{digest}"


def decode_name(name: str) -> str | None:
    """The original text of an encoded name, or None for hashed (or foreign) names."""
    if "~" in name:
        return None
    raw = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "%":
            try:
                raw.append(int(name[i + 1 : i + 3], 16))
            except ValueError:
                return None
            i += 3
        else:
            raw.extend(name[i].encode("ascii", "replace"))
            i += 1
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; not every platform can open a directory, so best effort."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes, *, sync_folder: bool = True) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync_folder:
        _fsync_dir(path.parent)


def _info(key: str, data: bytes) -> ObjectInfo:
    return ObjectInfo(key=key, size=len(data), checksum=hashlib.sha256(data).hexdigest())


class LocalFolderObjectStore:
    """ObjectStore over a folder; nothing is touched until the first write."""

    def __init__(self, root: str | PathLike[str]) -> None:
        self.root = Path(root).absolute()

    def _folder(self, namespace: str) -> Path:
        return self.root / encode_name(namespace, "namespace")

    def _path(self, namespace: str, key: str) -> Path:
        return self._folder(namespace) / (encode_name(key) + SUFFIX)

    def ref(self, namespace: str, key: str) -> str:
        return self._path(namespace, key).as_uri()

    async def put(
        self, namespace: str, key: str, data: bytes, *, sync_folder: bool = True
    ) -> ObjectInfo:
        """Write `data` atomically; durable on return, unless `sync_folder=False`: then the
        file's bytes are fsynced but its rename is durable only after `sync_folder(ns)`
        (the archiver writes a batch of originals and syncs their folder once)."""
        path = self._path(namespace, key)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValidationError(f"object data must be bytes, got {type(data).__name__}")
        payload = bytes(data)
        await self._run(self._put, path, key, payload, sync_folder)
        return _info(key, payload)

    @staticmethod
    def _put(path: Path, key: str, data: bytes, sync_folder: bool = True) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        name = path.name[: -len(SUFFIX)]
        if "~" in name:  # hashed: keep the key so that list() can report it
            _write_atomic(
                path.with_name(name + KEY_SUFFIX), key.encode("utf-8"), sync_folder=sync_folder
            )
        _write_atomic(path, data, sync_folder=sync_folder)

    async def sync_folder(self, namespace: str) -> None:
        """Make the renames of `put(..., sync_folder=False)` in `namespace` durable."""
        await self._run(_fsync_dir, self._folder(namespace))

    async def head(self, namespace: str, key: str) -> ObjectInfo | None:
        """Size and checksum of the bytes on disk now (re-hashed, so corruption shows)."""
        data = await self._run(self._read, self._path(namespace, key))
        return None if data is None else _info(key, data)

    async def get(self, namespace: str, key: str) -> bytes:
        data = await self._run(self._read, self._path(namespace, key))
        if data is None:
            raise NotFoundError(f"no object {key!r} in namespace {namespace!r} under {self.root}")
        return data

    @staticmethod
    def _read(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    async def delete(self, namespace: str, key: str) -> None:
        """Deleting a missing object is not an error (reruns converge)."""
        await self._run(self._delete, self._path(namespace, key))

    @staticmethod
    def _delete(path: Path) -> None:
        path.unlink(missing_ok=True)
        path.with_name(path.name[: -len(SUFFIX)] + KEY_SUFFIX).unlink(missing_ok=True)
        _fsync_dir(path.parent)

    async def list(self, namespace: str) -> list[str]:
        return await self._run(self._list, self._folder(namespace))

    @staticmethod
    def _list(folder: Path) -> builtins.list[str]:
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return []
        keys: builtins.list[str] = []
        for name in names:
            if name.startswith(".") or not name.endswith(SUFFIX):
                continue  # temporary files of writes in progress
            stem = name[: -len(SUFFIX)]
            key = decode_name(stem)
            if key is None:
                try:
                    key = (folder / (stem + KEY_SUFFIX)).read_text("utf-8")
                except (FileNotFoundError, UnicodeDecodeError):
                    continue  # not ours
            keys.append(key)
        return sorted(keys)

    async def close(self) -> None:
        """Nothing to release: every call opens and closes its own files."""

    async def _run(self, fn: Callable[..., R], *args: object) -> R:
        try:
            return await asyncio.to_thread(fn, *args)
        except OSError as e:
            raise BackendUnavailableError(
                f"local archive folder {self.root} failed: {e} (check that it exists, is "
                "writable and has free space)"
            ) from e
