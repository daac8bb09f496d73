"""Archived originals in S3-compatible object storage (AWS S3, Cloudflare R2, MinIO).

The archival pipeline deletes a memory only after `head` has confirmed its original
(size and sha256), so every object carries its sha256 twice: as S3's own checksum
(`ChecksumAlgorithm="SHA256"`: the server rejects a body that does not match it) and
as `x-amz-meta-sha256`, which every S3-compatible server keeps even when it ignores
checksums. `get` re-hashes what it reads and refuses a body that no longer matches.

boto3 is synchronous; each call runs in a worker thread (`asyncio.to_thread`). The
client is built on first use, so constructing a store does no I/O. Throttling and 5xx
are retried by botocore's own retry modes; what is left after that is translated into
the core's typed errors, with the botocore error chained.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import string
import threading
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import unquote

from tiered_memory.errors import (
    ArchiveIntegrityError,
    BackendUnavailableError,
    ConfigurationError,
    NotFoundError,
    TieredMemoryError,
    ValidationError,
    missing_extra,
)
from tiered_memory.models import ObjectInfo

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")

_SUFFIX = ".json"
_PLAIN_ASCII = frozenset(string.ascii_letters + string.digits + "-_~")
_ADDRESSING: dict[bool | None, Literal["auto", "virtual", "path"]] = {
    None: "auto",
    False: "virtual",
    True: "path",
}
_MAX_KEY_BYTES = 1024  # S3's limit on an object key
_CHECKSUM_META = "sha256"

_NOT_FOUND = frozenset({"NoSuchKey", "NotFound", "404"})
_CREDENTIALS = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "403",
    }
)
_INTEGRITY = frozenset({"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch"})
_TRANSIENT = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "ServiceUnavailable"}
)


class S3ObjectStore:
    """The `ObjectStore` port on boto3: `{prefix}/{namespace}/{key}.json` in one bucket.

    For R2 or MinIO pass `endpoint_url=` (and `region_name="auto"` for R2).
    `path_style`: True puts the bucket in the path (`endpoint/bucket/key`: MinIO, local
    servers), False in the host name (`bucket.endpoint/key`), None lets botocore choose
    (path style for a custom endpoint, virtual hosts on AWS). Credentials come from
    the normal AWS chain (environment, profile, role) unless given here. Pass
    `client=` to reuse a configured boto3 S3 client; it is then the caller's to close.
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "tiered-memory",
        client: S3Client | None = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        path_style: bool | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        profile_name: str | None = None,
        retry_mode: Literal["standard", "adaptive", "legacy"] = "standard",
        max_attempts: int = 5,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        native_checksums: bool = True,
        page_size: int = 1000,
    ) -> None:
        if not isinstance(bucket, str) or not bucket.strip() or "/" in bucket:
            raise ConfigurationError(f"bucket must be a bucket name, got {bucket!r}")
        if client is not None and (
            endpoint_url
            or region_name
            or aws_access_key_id
            or profile_name
            or path_style is not None
        ):
            raise ConfigurationError(
                "endpoint, region, credentials and path_style configure a client built "
                "here; set them on the client you passed instead"
            )
        if max_attempts < 1:
            raise ConfigurationError("max_attempts counts the first try: it must be >= 1")
        if not 1 <= page_size <= 1000:
            raise ConfigurationError("page_size must be in 1..1000 (S3's maximum page)")
        parts = [p for p in prefix.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ConfigurationError(f"prefix {prefix!r} may not contain '.' or '..' segments")
        self.bucket = bucket
        self.prefix = "/".join(parts)
        self.endpoint_url = endpoint_url
        self.region_name = region_name
        self.path_style = path_style
        self.retry_mode = retry_mode
        self.max_attempts = max_attempts
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.native_checksums = native_checksums
        self.page_size = page_size
        self._credentials = {
            "aws_access_key_id": aws_access_key_id,
            "aws_secret_access_key": aws_secret_access_key,
            "aws_session_token": aws_session_token,
            "profile_name": profile_name,
        }
        self._client: S3Client | None = client
        self._owns_client = client is None
        self._client_lock = threading.Lock()

    # -- keys --------------------------------------------------------------------------

    def object_key(self, namespace: str, key: str) -> str:
        """Where an original lives; hostile namespaces and ids cannot escape or collide.

        Each part is percent-encoded (see `_encode`: `/`, `.`, `%` and control
        characters become inert escapes), which makes the mapping injective: two
        different (namespace, key) pairs never share an object key.
        """
        ns = _encode(namespace, "namespace")
        name = _encode(key, "key")
        object_key = f"{self._namespace_prefix_of(ns)}{name}{_SUFFIX}"
        if len(object_key.encode()) > _MAX_KEY_BYTES:
            raise ValidationError(
                f"the object key for this namespace and id is {len(object_key.encode())} "
                f"bytes once encoded; S3 allows {_MAX_KEY_BYTES}: use a shorter namespace or id"
            )
        return object_key

    def ref(self, namespace: str, key: str) -> str:
        return f"s3://{self.bucket}/{self.object_key(namespace, key)}"

    def _namespace_prefix_of(self, encoded_namespace: str) -> str:
        return f"{self.prefix}/{encoded_namespace}/" if self.prefix else f"{encoded_namespace}/"

    # -- the port ----------------------------------------------------------------------

    async def put(self, namespace: str, key: str, data: bytes) -> ObjectInfo:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ValidationError(f"data must be bytes, got {type(data).__name__}")
        body = bytes(data)
        object_key = self.object_key(namespace, key)
        digest = hashlib.sha256(body).digest()
        digest_b64 = base64.b64encode(digest).decode()

        def call(client: S3Client) -> str | None:
            extra: dict[str, Any] = {"ChecksumAlgorithm": "SHA256"} if self.native_checksums else {}
            response = client.put_object(
                Bucket=self.bucket,
                Key=object_key,
                Body=body,
                ContentType="application/json",
                Metadata={_CHECKSUM_META: digest.hex()},
                **extra,
            )
            return response.get("ChecksumSHA256")

        echoed = await self._run(call, "put", object_key)
        if echoed is not None and echoed != digest_b64:
            raise ArchiveIntegrityError(
                f"S3 stored {self._uri(object_key)} with sha256 {echoed!r}, expected "
                f"{digest_b64!r}; the upload was altered in transit, put it again"
            )
        return ObjectInfo(key=key, size=len(body), checksum=digest.hex())

    async def head(self, namespace: str, key: str) -> ObjectInfo | None:
        object_key = self.object_key(namespace, key)

        def call(client: S3Client) -> ObjectInfo | None:
            extra: dict[str, Any] = {"ChecksumMode": "ENABLED"} if self.native_checksums else {}
            try:
                response = client.head_object(Bucket=self.bucket, Key=object_key, **extra)
            except Exception as e:
                if _is_not_found(e):
                    return None
                raise
            checksum = response.get("Metadata", {}).get(_CHECKSUM_META) or _hex_of(
                response.get("ChecksumSHA256")
            )
            # An object this store did not write may carry no sha256: report "" so a
            # verification against an expected checksum fails rather than passes.
            return ObjectInfo(key=key, size=response["ContentLength"], checksum=checksum or "")

        return await self._run(call, "head", object_key)

    async def get(self, namespace: str, key: str) -> bytes:
        object_key = self.object_key(namespace, key)

        def call(client: S3Client) -> tuple[bytes, str | None, int]:
            extra: dict[str, Any] = {"ChecksumMode": "ENABLED"} if self.native_checksums else {}
            response = client.get_object(Bucket=self.bucket, Key=object_key, **extra)
            body = response["Body"].read()  # botocore checks S3's checksum while reading
            expected = response.get("Metadata", {}).get(_CHECKSUM_META)
            return body, expected, response["ContentLength"]

        body, expected, length = await self._run(call, "get", object_key)
        if len(body) != length:
            raise ArchiveIntegrityError(
                f"{self._uri(object_key)} returned {len(body)} bytes of {length}; read it again"
            )
        if expected is not None and hashlib.sha256(body).hexdigest() != expected.lower():
            raise ArchiveIntegrityError(
                f"{self._uri(object_key)} no longer matches its sha256 {expected}; the object "
                "was changed outside tiered-memory: restore it from a bucket version or backup"
            )
        return body

    async def delete(self, namespace: str, key: str) -> None:
        """Remove an original; deleting one that is absent is not an error (S3 semantics)."""
        object_key = self.object_key(namespace, key)

        def call(client: S3Client) -> None:
            client.delete_object(Bucket=self.bucket, Key=object_key)

        await self._run(call, "delete", object_key)

    async def list(self, namespace: str) -> list[str]:
        """Every key stored in `namespace`, sorted; pages through any number of objects."""
        start = self._namespace_prefix_of(_encode(namespace, "namespace"))

        def call(client: S3Client) -> list[str]:
            paginator = client.get_paginator("list_objects_v2")
            keys: list[str] = []
            for page in paginator.paginate(
                Bucket=self.bucket, Prefix=start, PaginationConfig={"PageSize": self.page_size}
            ):
                for item in page.get("Contents", []):
                    name = item["Key"][len(start) :]
                    if name.endswith(_SUFFIX) and "/" not in name:
                        key = _decode(name[: -len(_SUFFIX)])
                        if key is not None:  # skip objects other tools put here
                            keys.append(key)
            return keys

        return sorted(await self._run(call, "list", start))

    async def close(self) -> None:
        """Close the client built here; a client passed in belongs to the caller."""
        if not self._owns_client:
            return
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)

    # -- dev and test helpers ------------------------------------------------------------

    async def create_bucket_if_missing(self) -> bool:
        """Create the bucket unless it exists; True when it was created (dev and tests)."""

        def call(client: S3Client) -> bool:
            try:
                client.head_bucket(Bucket=self.bucket)
                return False
            except Exception as e:
                if not _is_not_found(e) and _error_code(e) != "NoSuchBucket":
                    raise
            region = client.meta.region_name
            try:
                if region and region != "us-east-1":
                    client.create_bucket(
                        Bucket=self.bucket,
                        CreateBucketConfiguration={"LocationConstraint": region},  # type: ignore[typeddict-item]
                    )
                else:
                    client.create_bucket(Bucket=self.bucket)
            except Exception as e:
                if _error_code(e) in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    return False  # created concurrently by another process
                raise
            return True

        return await self._run(call, "create bucket", "")

    # -- plumbing ------------------------------------------------------------------------

    def client(self) -> S3Client:
        """The boto3 client, built on first use (it reads the AWS config chain)."""
        with self._client_lock:
            if self._client is None:
                self._client = self._build_client()
            return self._client

    def _build_client(self) -> S3Client:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as e:
            raise missing_extra("boto3", "s3") from e
        config = Config(
            # total_max_attempts counts the first try; botocore's max_attempts does not.
            retries={"mode": self.retry_mode, "total_max_attempts": self.max_attempts},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            s3={"addressing_style": _ADDRESSING[self.path_style]},
        )
        # A session of our own: boto3's default session is global and not thread-safe.
        session = boto3.session.Session(
            aws_access_key_id=self._credentials["aws_access_key_id"],
            aws_secret_access_key=self._credentials["aws_secret_access_key"],
            aws_session_token=self._credentials["aws_session_token"],
            region_name=self.region_name,
            profile_name=self._credentials["profile_name"],
        )
        return session.client("s3", endpoint_url=self.endpoint_url, config=config)

    async def _run(self, call: Callable[[S3Client], T], action: str, object_key: str) -> T:
        def work() -> T:
            return call(self.client())

        try:
            return await asyncio.to_thread(work)
        except TieredMemoryError:
            raise
        except Exception as e:
            raise self._translate(e, action, object_key) from e

    def _uri(self, object_key: str) -> str:
        return f"s3://{self.bucket}/{object_key}"

    def _translate(self, error: Exception, action: str, object_key: str) -> Exception:
        """A botocore error as the core error that says what to do about it."""
        from botocore import exceptions as boto

        where = self._uri(object_key) if object_key else f"bucket {self.bucket!r}"
        endpoint = self.endpoint_url or "AWS S3"
        if isinstance(error, boto.ClientError):
            code = _error_code(error) or ""
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code == "NoSuchBucket":
                return ConfigurationError(
                    f"bucket {self.bucket!r} does not exist at {endpoint}; create it, or call "
                    "create_bucket_if_missing() in development"
                )
            if code in _NOT_FOUND:
                return NotFoundError(f"no archived original at {where}")
            if code in _CREDENTIALS or status in (401, 403):
                return ConfigurationError(
                    f"S3 refused to {action} {where} ({code}); check the credentials the AWS "
                    "chain found (AWS_ACCESS_KEY_ID/AWS_PROFILE/role) and the bucket policy"
                )
            if code in _INTEGRITY:
                return ArchiveIntegrityError(
                    f"S3 rejected the {action} of {where}: the body did not match its "
                    f"checksum ({code}); retry the write"
                )
            if code in _TRANSIENT or status >= 500:
                return BackendUnavailableError(
                    f"S3 kept failing to {action} {where} ({code or status}) after "
                    f"{self.max_attempts} attempts; retry later"
                )
            return TieredMemoryError(f"S3 could not {action} {where}: {code} {error}")
        if isinstance(error, boto.FlexibleChecksumError):
            return ArchiveIntegrityError(
                f"{where} failed S3's checksum on read ({error}); the stored object is damaged"
            )
        if isinstance(error, boto.NoCredentialsError | boto.PartialCredentialsError):
            return ConfigurationError(
                f"no AWS credentials found for {endpoint}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or pass them to S3ObjectStore"
            )
        if isinstance(error, boto.ConnectionError | boto.HTTPClientError):
            return BackendUnavailableError(
                f"cannot reach {endpoint} to {action} {where} ({type(error).__name__}); "
                "check the endpoint URL and network, then retry"
            )
        if isinstance(error, boto.BotoCoreError):
            return TieredMemoryError(f"S3 could not {action} {where}: {error}")
        return error  # not a backend error: a bug, left as it is


def _encode(part: str, what: str) -> str:
    """Percent-encode everything but ASCII letters, digits, `-_~` and printable non-ASCII.

    `%` is always escaped, so decoding is exact and the mapping injective. `.` and `/`
    are escaped so no part can act as a path segment. Non-ASCII letters and symbols
    stay as UTF-8 (S3 keys are UTF-8, limited to 1024 bytes, and escaping them would
    triple their size); non-ASCII controls, format characters and separators are
    escaped, as they are invisible in listings and consoles.
    """
    if not isinstance(part, str) or not part:
        raise ValidationError(f"an object {what} must be a non-empty string, got {part!r}")
    out: list[str] = []
    for char in part:
        if char in _PLAIN_ASCII or (ord(char) > 127 and unicodedata.category(char)[0] not in "CZ"):
            out.append(char)
            continue
        try:
            raw = char.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValidationError(f"the object {what} is not valid Unicode (lone surrogate)") from e
        out.append("".join(f"%{byte:02X}" for byte in raw))
    return "".join(out)


def _decode(name: str) -> str | None:
    """The part `name` encodes, or None when `name` was not written by `_encode`."""
    try:
        part = unquote(name, errors="strict")
        return part if _encode(part, "key") == name else None
    except (UnicodeDecodeError, ValidationError):
        return None


def _error_code(error: Exception) -> str | None:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return str(code) if code is not None else None


def _is_not_found(error: Exception) -> bool:
    if _error_code(error) in _NOT_FOUND:
        return True
    response = getattr(error, "response", None)
    return isinstance(response, dict) and (
        response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404
        and _error_code(error) != "NoSuchBucket"
    )


def _hex_of(checksum_b64: str | None) -> str | None:
    """S3's base64 sha256 as hex; None for composite (multipart) or absent checksums."""
    if not checksum_b64 or "-" in checksum_b64:
        return None
    try:
        raw = base64.b64decode(checksum_b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == 32 else None


__all__ = ["S3ObjectStore"]
