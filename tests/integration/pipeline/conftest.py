"""The archival pipeline over real HTTP: the moto S3 server and the Messages API stub
are the ones the adapters' own tests use."""

from tests.integration.anthropic.conftest import _no_ambient_config, stub
from tests.integration.s3.conftest import _dummy_aws, moto_server, outage_server, s3_endpoint

__all__ = [
    "_dummy_aws",
    "_no_ambient_config",
    "moto_server",
    "outage_server",
    "s3_endpoint",
    "stub",
]
