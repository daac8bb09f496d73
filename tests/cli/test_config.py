"""Settings from environment variables and TOML; unknown keys rejected; the policy
applied; the backend registry (`tiered_memory.wiring`) imports lazily and builds a
working memory."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tiered_memory import AsyncTieredMemory, ConfigurationError, MemoryType, Tier, TieredMemory
from tiered_memory.config import default_data_dir, load_settings, parse_duration
from tiered_memory.errors import MissingDependencyError, ValidationError
from tiered_memory.policy import Policy
from tiered_memory.wiring import BACKENDS, backend_class


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tiered-memory.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_the_policy_defaults(tmp_path: Path) -> None:
    s = load_settings()
    assert s.store.backend == "sqlite"
    assert (s.graph.backend, s.objects.backend) == ("sqlite", "local")
    assert (s.summarizer.backend, s.embedder.backend) == ("extractive", "hashing")
    assert s.policy == Policy()
    assert s.namespace == "default"
    assert s.resolved_db_path() == tmp_path / "xdg-data" / "tiered-memory" / "memory.db"


def test_data_folder_without_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert default_data_dir() == tmp_path / ".local" / "share" / "tiered-memory"
    assert default_data_dir().name == "tiered-memory"


def test_environment_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TIERED_MEMORY_NAMESPACE", "user-42")
    monkeypatch.setenv("TIERED_MEMORY_STORE__PATH", str(tmp_path / "x.db"))
    monkeypatch.setenv("TIERED_MEMORY_GRAPH__NEO4J__PASSWORD", "s3cret")
    monkeypatch.setenv("TIERED_MEMORY_POLICY__TIERS__HOT_TTL", "48h")
    monkeypatch.setenv("TIERED_MEMORY_POLICY__DECAY__HALF_LIFE_DAYS__EPISODIC", "20")
    monkeypatch.setenv("TIERED_MEMORY_POLICY__RETRIEVAL__MAX_ITEMS", "7")
    s = load_settings()
    assert s.namespace == "user-42"
    assert s.resolved_db_path() == tmp_path / "x.db"
    assert s.graph.neo4j.password is not None
    assert s.graph.neo4j.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)  # credentials never printed
    assert s.policy.tiers.hot_ttl == timedelta(hours=48)
    half_lives = s.policy.decay.half_life_days
    assert half_lives[MemoryType.EPISODIC] == 20  # one overridden ...
    assert half_lives[MemoryType.PROCEDURAL] == 180  # ... the others kept
    assert s.policy.retrieval.max_items == 7


def test_toml_file_and_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        """
namespace = "from-file"
data_dir = "/srv/memory"

[store]
backend = "weaviate"
[store.weaviate]
url = "http://weaviate:8080"

[objects]
backend = "s3"
[objects.s3]
bucket = "memories"
endpoint_url = "http://minio:9000"

[policy.budget]
pinned = 0.2
hot = 0.4
warm = 0.3
cold = 0.1

[policy.tiers]
warm_idle = "30d"
cold_to_archive = "1w"

[policy.scoring.tier_factor]
cold = 0.25
""",
    )
    monkeypatch.setenv("TIERED_MEMORY_NAMESPACE", "from-env")  # env beats the file
    s = load_settings(path)
    assert s.namespace == "from-env"
    assert s.data_dir == Path("/srv/memory")
    assert (s.store.backend, s.store.weaviate.url) == ("weaviate", "http://weaviate:8080")
    assert (s.objects.s3.bucket, s.objects.s3.endpoint_url) == ("memories", "http://minio:9000")
    assert (s.policy.budget.pinned, s.policy.budget.cold) == (0.2, 0.1)
    assert s.policy.tiers.warm_idle == timedelta(days=30)
    assert s.policy.tiers.cold_to_archive == timedelta(days=7)
    assert s.policy.scoring.tier_factor[Tier.COLD] == 0.25
    assert s.policy.scoring.tier_factor[Tier.ARCHIVED] == pytest.approx(1 / 1.2)
    assert load_settings(path, namespace="given").namespace == "given"  # overrides win


def test_config_file_from_environment_and_default_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _toml(tmp_path, 'namespace = "via-env"\n')
    monkeypatch.setenv("TIERED_MEMORY_CONFIG", str(path))
    assert load_settings().namespace == "via-env"
    monkeypatch.delenv("TIERED_MEMORY_CONFIG")
    home_config = tmp_path / "xdg-config" / "tiered-memory" / "config.toml"
    home_config.parent.mkdir(parents=True)
    home_config.write_text('namespace = "from-home"\n', encoding="utf-8")
    assert load_settings().namespace == "from-home"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('namespce = "x"\n', "namespce"),
        ('[store]\nbackend = "sqlite"\nurl = "x"\n', "store.url"),
        ("[policy.budget]\nhott = 0.5\n", "policy.budget.hott"),
        ("[policy.decay.half_life_days]\ngossip = 3\n", "policy.decay.half_life_days"),
        ('[graph.neo4j]\nuri = "bolt://x"\npasword = "x"\n', "graph.neo4j.pasword"),
        ('[embedder]\nbackend = "openai"\n', "embedder.backend"),
    ],
)
def test_unknown_keys_in_toml_are_errors(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(_toml(tmp_path, text))
    message = str(caught.value)
    assert key in message
    assert "\n" not in message


def test_unknown_environment_variables_are_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERED_MEMORY_POLICY__BUDGET__HOTT", "0.5")
    with pytest.raises(ConfigurationError, match=r"policy\.budget\.hott"):
        load_settings()
    monkeypatch.delenv("TIERED_MEMORY_POLICY__BUDGET__HOTT")
    monkeypatch.setenv("TIERED_MEMORY_STORE_BACKEND", "weaviate")  # one underscore: a typo
    with pytest.raises(ConfigurationError, match="TIERED_MEMORY_STORE_BACKEND"):
        load_settings()
    monkeypatch.delenv("TIERED_MEMORY_STORE_BACKEND")
    monkeypatch.setenv("TIERED_MEMORY_MODEL_PATH", "/models/minilm")  # read by embeddings
    assert load_settings().store.backend == "sqlite"


def test_invalid_values_and_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_settings(_toml(tmp_path, "namespace = \n"))
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")
    with pytest.raises(ConfigurationError, match=r"sum to at most 1\.0"):
        load_settings(_toml(tmp_path, "[policy.budget]\nhot = 0.9\n"))
    with pytest.raises(ConfigurationError, match="hot_ttl"):
        load_settings(_toml(tmp_path, '[policy.tiers]\nhot_ttl = "soon"\n'))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90d", timedelta(days=90)),
        ("6h", timedelta(hours=6)),
        ("1w2d", timedelta(days=9)),
        ("30m", timedelta(minutes=30)),
        ("1.5h", timedelta(minutes=90)),
        (" 45 s ", timedelta(seconds=45)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "90", "d", "5x", "0h", "-3d", "3 days"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValidationError, match="duration"):
        parse_duration(text)


def test_registry_is_one_table_of_import_paths() -> None:
    kinds = {kind for kind, _ in BACKENDS}
    assert kinds == {"store", "graph", "objects", "summarizer", "embedder"}
    assert BACKENDS["store", "weaviate"].module == "tiered_memory.backends.weaviate"
    assert BACKENDS["graph", "neo4j"].attr == "Neo4jAssociationGraph"
    assert BACKENDS["objects", "s3"].extra == "s3"
    assert BACKENDS["summarizer", "anthropic"].attr == "AnthropicSummarizer"
    from tiered_memory.backends.sqlite import SQLiteMemoryStore

    assert backend_class("store", "sqlite") is SQLiteMemoryStore
    with pytest.raises(ConfigurationError, match="expected one of"):
        backend_class("store", "redis")


def test_a_missing_backend_module_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def refuse(name: str, package: str | None = None) -> object:
        if name == "tiered_memory.backends.neo4j":
            raise ModuleNotFoundError("No module named 'neo4j'", name="neo4j")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", refuse)
    with pytest.raises(MissingDependencyError, match=r"tiered-memory\[neo4j\]"):
        backend_class("graph", "neo4j")


def test_importing_config_imports_no_backend_sdk() -> None:
    code = (
        "import sys, tiered_memory.config, tiered_memory.wiring, tiered_memory.cli\n"
        "import tiered_memory.transfer\n"
        "heavy = {'weaviate', 'neo4j', 'boto3', 'anthropic', 'sentence_transformers', "
        "'tiered_memory.backends.sqlite'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


async def test_build_memory_wires_the_embedded_stack(tmp_path: Path) -> None:
    s = load_settings(
        store={"path": str(tmp_path / "m.db")},
        embedder={"dimension": 64},
        policy={"retrieval": {"max_items": 3}, "tiers": {"hot_ttl": "1h"}},
    )
    memory = await AsyncTieredMemory.from_settings(s)
    try:
        assert isinstance(memory, AsyncTieredMemory)
        assert memory.policy.retrieval.max_items == 3
        assert memory.policy.tiers.hot_ttl == timedelta(hours=1)
        m = await memory.add("hello from the config", namespace="n")
        assert await memory.store.dimension() == 64
        assert (await memory.get(m.id, namespace="n")) is not None
        assert await memory.archive([m.id], namespace="n") == 1
        assert (tmp_path / "m.db.archive").is_dir()  # originals beside the file
    finally:
        await memory.close()


def test_build_sync_memory_and_separate_graph_file(tmp_path: Path) -> None:
    s = load_settings(
        store={"path": str(tmp_path / "m.db")},
        graph={"path": str(tmp_path / "graph.db")},
        objects={"path": str(tmp_path / "originals")},
    )
    with TieredMemory.from_settings(s) as memory:
        a = memory.add("the cat sat on the mat")
        b = memory.add("a dog sat on the rug")
        memory.link(a.id, b.id, weight=0.9)
        assert any(link.target == b.id for link in memory.links(a.id))
        memory.archive([a.id])
    assert (tmp_path / "graph.db").exists()
    assert any((tmp_path / "originals").rglob("*.json"))


def test_the_documented_example_configuration_loads(tmp_path: Path) -> None:
    import re

    docs = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
    example = re.search(r"```toml\n(.*?)```", docs.read_text(encoding="utf-8"), re.S)
    assert example is not None
    s = load_settings(_toml(tmp_path, example.group(1)))
    assert s.policy.maintenance_interval == timedelta(hours=6)
    assert s.policy.decay.half_life_days[MemoryType.EPISODIC] == 20
    assert s.policy.retrieval.archive_min_cosine == 0.6
    assert s.objects.s3.path_style is True


class _Recorder:
    """Stands in for a production adapter: records how the factory built it."""

    calls: ClassVar[list[tuple[tuple[Any, ...], dict[str, Any]]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.built_with = (args, kwargs)

    @classmethod
    async def connect(cls, *args: Any, **kwargs: Any) -> _Recorder:
        cls.calls.append((args, kwargs))
        return cls()

    async def open(self) -> None:  # the graph is built, then opened (it may be down)
        type(self).calls.append(self.built_with)


async def test_production_builders_pass_the_settings(tmp_path: Path) -> None:
    from tiered_memory.wiring import _Wiring

    s = load_settings(
        _toml(
            tmp_path,
            """
[store.weaviate]
url = "https://weaviate.example:8443"
api_key = "wv-key"
prefix = "Agents"
grpc_port = 443
headers = { "X-Extra" = "h" }
[graph.neo4j]
uri = "neo4j+s://graph.example"
user = "memory"
password = "pw"
database = "mem"
""",
        )
    )
    _Recorder.calls = []
    await BACKENDS["store", "weaviate"].build(_Recorder, _Wiring(settings=s))
    await BACKENDS["graph", "neo4j"].build(_Recorder, _Wiring(settings=s))
    (store_args, store_kwargs), (graph_args, graph_kwargs) = _Recorder.calls
    assert store_args == ()
    assert store_kwargs == {
        "url": "https://weaviate.example:8443",
        "api_key": "wv-key",
        "prefix": "Agents",
        "grpc_port": 443,
        "grpc_host": None,
        "headers": {"X-Extra": "h"},
        "cold_quantizer": "none",
        "use_days_kept": 64,
    }
    assert graph_args == ("neo4j+s://graph.example", ("memory", "pw"))
    assert graph_kwargs == {"database": "mem"}


async def test_s3_and_claude_are_wired_without_any_io(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERED_MEMORY_OBJECTS__BACKEND", "s3")
    monkeypatch.setenv("TIERED_MEMORY_OBJECTS__S3__BUCKET", "memories")
    monkeypatch.setenv("TIERED_MEMORY_OBJECTS__S3__ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("TIERED_MEMORY_SUMMARIZER__BACKEND", "anthropic")
    monkeypatch.setenv("TIERED_MEMORY_SUMMARIZER__ANTHROPIC__API_KEY", "sk-test")
    monkeypatch.setenv("TIERED_MEMORY_POLICY__ARCHIVAL__SUMMARIZER_RATE_PER_SECOND", "2.5")
    memory = await AsyncTieredMemory.from_settings(
        load_settings(store={"path": str(tmp_path / "m.db")})
    )
    try:
        from tiered_memory.summarizers.anthropic import AnthropicSummarizer

        objects, summarizer = memory.objects, memory.summarizer
        assert type(objects).__name__ == "S3ObjectStore"
        assert objects.ref("ns", "id").startswith("s3://memories/")
        assert isinstance(summarizer, AnthropicSummarizer)
        assert summarizer.rate_per_second == 2.5  # the policy's archival rate
        assert summarizer.fallback is not None  # extractive when Claude fails
    finally:
        await memory.close()
