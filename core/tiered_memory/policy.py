"""Every tunable number of DESIGN.md, in one place.

`Policy` is the single config object; the engine, the sweep and the retrieval code
read their numbers from it and from nowhere else. All sections are frozen so a
running engine cannot be half-reconfigured.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .models import MemoryType, Tier
from .pricing import ModelPricing

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class DecayPolicy(BaseModel):
    """Half-lives and floors behind retention (DESIGN.md section 3)."""

    model_config = _FROZEN

    half_life_days: dict[MemoryType, float] = Field(
        default_factory=lambda: {
            MemoryType.PROCEDURAL: 180.0,
            MemoryType.FACTUAL: 90.0,
            MemoryType.PROJECT: 45.0,
            MemoryType.EPISODIC: 10.0,
        }
    )
    floor: float = Field(default=0.0, ge=0.0, le=1.0)
    core_floor: float = Field(default=0.60, ge=0.0, le=1.0)
    frequency_saturation: int = Field(default=32, ge=1)

    @model_validator(mode="after")
    def _every_type(self) -> DecayPolicy:
        missing = set(MemoryType) - set(self.half_life_days)
        if missing:
            raise ValueError(f"half_life_days lacks {sorted(m.value for m in missing)}")
        if any(v <= 0 for v in self.half_life_days.values()):
            raise ValueError("half-lives must be positive")
        return self


class ScoringWeights(BaseModel):
    """score = tier_factor * (relevance*w_r + retention*w_t + frequency*w_f)."""

    model_config = _FROZEN

    # Tuned on the LoCoMo dev split (benchmarks/README.md): relevance decides,
    # freshness only breaks ties, and use acts through the tiers (promotion, the core
    # floor) rather than as a score term. DESIGN.md's first 0.5/0.3/0.2 let small
    # talk that was fresh and often injected outrank the memory a question asks about.
    relevance: float = Field(default=0.95, ge=0.0)
    retention: float = Field(default=0.05, ge=0.0)
    frequency: float = Field(default=0.0, ge=0.0)
    tier_factor: dict[Tier, float] = Field(
        default_factory=lambda: {
            Tier.HOT: 1.0,
            Tier.WARM: 1.0,
            # COLD is kept back by when it is searched (only without k strong active
            # hits) and by its share; halving its score as well (DESIGN.md's first
            # 0.5) hid the faded memory a question was about (LoCoMo dev split)
            Tier.COLD: 1.0,
            Tier.ARCHIVED: 1 / 1.2,
        }
    )


class FusionWeights(BaseModel):
    """Hybrid relevance: min-max normalised vector, lexical and graph strengths."""

    model_config = _FROZEN

    vector: float = Field(default=0.6, ge=0.0)
    keyword: float = Field(default=0.3, ge=0.0)
    graph: float = Field(
        default=0.0,
        ge=0.0,
        description=(
            "weight of the association path strength in relevance. Off by default: most"
            " links are auto-links weighted by the two memories' cosine, so the term"
            " repeated the vector signal (DESIGN.md's 0.1 cost LoCoMo dev 0.013 at 1,000"
            " tokens and LongMemEval dev 0.019 at 250). Linked neighbours still join the"
            " candidates (phase 2) and revive COLD memories; set it (or pass"
            " weights={'graph': ...}) when your links are your own (link())"
        ),
    )
    speaker: float = Field(
        default=0.1,
        ge=0.0,
        description=(
            "relevance a memory gains when the query names its speaker (metadata"
            " 'speaker', or a transcript's leading 'Name:'); see cues.py"
        ),
    )
    time: float = Field(
        default=0.15,
        ge=0.0,
        description="relevance a memory that mentions a time gains when the query asks when",
    )

    @model_validator(mode="after")
    def _not_all_zero(self) -> FusionWeights:
        if self.vector + self.keyword + self.graph <= 0:
            raise ValueError("at least one fusion weight must be positive")
        return self


class BudgetShares(BaseModel):
    """Reservations inside an injection budget; the rest is filled best score first.

    Pinned memories reserve a quarter of the budget (pinning says "always consider
    this"). Tier shares are reservations too, off by default: on the LoCoMo dev split,
    tier shares filled in tier order let weaker HOT/WARM lines take the room better
    lines of another tier needed, and a larger budget could inject a worse context.
    The tiers act through the score and through what is searched instead. Set a tier's
    share to guarantee its best relevant lines room ahead of better lines of other
    tiers (a trade: the packing is then no longer faithful to the score).
    """

    model_config = _FROZEN

    pinned: float = Field(default=0.25, ge=0.0, le=1.0)
    hot: float = Field(default=0.0, ge=0.0, le=1.0)
    warm: float = Field(default=0.0, ge=0.0, le=1.0)
    cold: float = Field(default=0.0, ge=0.0, le=1.0)  # archived hits share COLD's
    reserve_min_relevance: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description=(
            "fused relevance a hit needs to claim a tier's reservation; weaker hits only"
            " compete for what is left, best score first"
        ),
    )

    @model_validator(mode="after")
    def _at_most_the_budget(self) -> BudgetShares:
        total = self.pinned + self.hot + self.warm + self.cold
        if total > 1.0 + 1e-6:
            raise ValueError(f"budget shares must sum to at most 1.0, got {total:.4f}")
        return self


class RetrievalPolicy(BaseModel):
    model_config = _FROZEN

    candidates: int = Field(default=50, ge=1, description="vector and lexical top-N per phase")
    cold_candidates: int = Field(
        default=25,
        ge=1,
        description=(
            "vector and lexical top-N of the COLD phase, or the items still missing if"
            " more: COLD fills what the active tiers lacked"
        ),
    )
    noise_floor: float = Field(
        default=0.05, description="raw cosine under which a vector-only candidate is dropped"
    )
    lexical_floor: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="share of the best BM25 score a lexical-only candidate needs",
    )
    relevance_threshold: float = Field(
        default=0.7,
        description=(
            "raw cosine a hit needs to count as 'found' in phase 1; COLD is searched"
            " unless k hits are found. At 0.25, k loosely related active memories kept"
            " the one COLD memory that answered a question from ever being searched"
            " (LoCoMo dev split)"
        ),
    )
    seed_threshold: float = Field(
        default=0.25,
        description=(
            "raw cosine a hit needs to seed the graph walk, and to count as found on its"
            " own rather than through an association"
        ),
    )
    context_seeds: int = Field(
        default=10,
        ge=0,
        description=(
            "the best hits whose neighbours in time (the memory written just before and"
            " after) join the candidates: the turn after a question often holds its"
            " answer. 0 turns this off"
        ),
    )
    context_window: timedelta = Field(
        default=timedelta(minutes=10),
        description="how far apart in time a neighbour may be to count as a hit's context",
    )
    context_decay: float = Field(
        default=0.8,
        ge=0.0,
        le=1.0,
        description=(
            "a neighbour scores at least this share of its hit's score, so it follows"
            " the hit into the budget when there is room (LoCoMo dev split: 0.75-0.85)"
        ),
    )
    update_similarity: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=(
            "a memory written later that is at least this similar (cosine) to one of the"
            " best hits is taken as its update and ranks just above it (see updates.py)."
            " Off (None) by default: at 0.8 it changed no LongMemEval dev question and"
            " cost LoCoMo dev 0.002"
        ),
    )
    update_min_gap: timedelta = Field(
        default=timedelta(hours=1),
        description="how much later a memory must be written to count as an update",
    )
    update_candidates: int = Field(
        default=20, ge=0, description="how many of the best hits are checked for updates"
    )
    graph_depth: int = Field(default=1, ge=1, le=3)
    graph_seeds: int = Field(default=5, ge=0)
    graph_min_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    graph_cooldown_seconds: float = Field(
        default=30.0, ge=0.0, description="skip the graph this long after it failed"
    )
    max_items: int | None = Field(
        default=None,
        ge=1,
        description=(
            "lines per injection; None lets the budget decide (a 20-line cap made a"
            " 2,000-token budget inject a worse context than 1,000)"
        ),
    )
    # 20, not 12: a line of either dev set averages 32 (LoCoMo) to 55 (LongMemEval user
    # turns) tokens, so at 20 each of the two searches still offers several times the
    # lines a budget holds. Evidence recall was the same within a question or two at
    # every budget (LoCoMo 0.622/0.715/0.801/0.867 -> 0.618/0.718/0.799/0.866,
    # LongMemEval 0.744/0.887/0.938/0.971 -> 0.744/0.906/0.938/0.971), and a 1,000-token
    # recall ranks 50 + 50 candidates instead of 84 + 84: ~25 % less CPU at 100k.
    tokens_per_candidate: int = Field(
        default=20,
        ge=1,
        description=(
            "recall searches max(candidates, budget / this) candidates, so a large"
            " budget is never short of lines to fill it"
        ),
    )
    max_candidates: int = Field(
        default=1000, ge=1, description="the most candidates a budget may ask for"
    )
    default_budget_tokens: int = Field(default=1000, ge=0)
    archived_limit: int = Field(default=3, ge=0)
    archive_min_cosine: float = Field(
        default=0.5,
        ge=-1.0,
        le=1.0,
        description=(
            "raw cosine an archived summary needs to join a search or recall that did not"
            " ask for the archive (deep, include_archived or tiers), searched while fewer"
            " than k strong live hits were found (seed 001's cold path). Below it the"
            " archive stays out, however little else was found (one at cosine 0.09 used to"
            " be injected). Seed 001's 0.65 was set for embedders whose cosines run high;"
            " with all-MiniLM-L6-v2 an archived fact a question asked for scored 0.55"
        ),
    )


class AssociationPolicy(BaseModel):
    model_config = _FROZEN

    autolink_top_k: int = Field(default=3, ge=0)
    autolink_min_similarity: float = Field(default=0.3, ge=0.0, le=1.0)
    # Off by default (DESIGN.md's first value was 0.1): an agent that injects 20
    # memories a turn links 190 pairs a turn, and the graph became a clique of the
    # generic memories injected most often. On the LoCoMo dev split the replay lost
    # 0.02 of evidence recall with it; auto-links between similar memories stay.
    co_recall_boost: float = Field(default=0.0, ge=0.0, le=1.0)


class TierPolicy(BaseModel):
    """The tier transition rules of DESIGN.md section 2."""

    model_config = _FROZEN

    hot_ttl: timedelta = timedelta(hours=72)
    hot_to_warm_min_importance: float = 0.5
    warm_idle: timedelta = timedelta(days=60)
    floor_epsilon: float = 0.001
    floor_dwell: timedelta = timedelta(days=7)
    reactivate_uses: int = 3
    reactivate_distinct_days: int = 2
    cold_to_archive: timedelta = timedelta(days=180)
    archive_min_age: timedelta = timedelta(days=90)
    archive_max_importance: float = 0.3
    archive_max_recent_uses: int = 2
    archive_recent_window: timedelta = timedelta(days=90)
    force_archive_age: timedelta | None = Field(
        default=timedelta(days=365),
        description=(
            "age from which a memory in any live tier is archived whatever its importance"
            " when used at most archive_max_recent_uses times within archive_recent_window"
            " (seed 001's force_archive_age_days); pinned and core memories never are."
            " None turns the rule off"
        ),
    )
    restore_expansions: int = 3
    restore_window: timedelta = timedelta(days=30)
    core_min_uses: int = 8
    core_min_distinct_days: int = 4
    core_min_retention: float = 0.6
    use_days_kept: int = 64


class ArchivalPolicy(BaseModel):
    """The archival pipeline's numbers (DESIGN.md section 6; `tiered_memory.archival`).

    `max_retries` and `backoff_base_seconds` are the summariser's own retries
    (`AnthropicSummarizer.from_policy`): the pipeline makes one call per step and
    retries nothing on top, so one layer retries. `claim_lease` bounds how long a claim
    of a process that stopped answering holds a memory; a claim of a process of this
    host that has exited is taken over at once. Correctness never depends on it: two
    archivals of one memory never share an object key, and only the claimant commits.
    """

    model_config = _FROZEN

    batch_size: int = Field(default=500, ge=1, description="memories archived per run, at most")
    summarizer_rate_per_second: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    backoff_base_seconds: float = Field(default=0.5, ge=0)
    pause_failure_ratio: float = Field(default=0.05, ge=0, le=1)
    quarantine_after: int = Field(
        default=3, ge=1, description="counted failures before a memory is set aside"
    )
    claim_lease: timedelta = Field(default=timedelta(minutes=15), gt=timedelta(0))
    # model-id prefix -> USD per million input/output tokens, over `pricing.PRICING`
    # (None: the table's prices)
    prices: dict[str, ModelPricing] | None = None


class ConsolidationPolicy(BaseModel):
    model_config = _FROZEN

    enabled: bool = True
    retention_below: float = Field(default=0.2, ge=0, le=1)
    min_similarity: float = Field(default=0.70, ge=0, le=1)
    max_group: int = Field(default=5, ge=2)
    archive_clusters: bool = Field(
        default=False,
        description=(
            "archive near-duplicate COLD memories due together (cosine at least"
            " min_similarity, at most max_group) under one summary that names every"
            " original (seed 002's 'summarise old COLD clusters'): fewer summariser"
            " calls, but off by default because each member's own summary is what later"
            " questions find (docs/design.md section 10 has the measurement)"
        ),
    )


class Limits(BaseModel):
    model_config = _FROZEN

    max_content_chars: int = Field(default=32_000, ge=1)
    max_namespace_chars: int = Field(default=256, ge=1)
    max_metadata_bytes: int = Field(default=64_000, ge=2)
    # Ids and sources are keys and labels, not documents: a 5 MB id was stored once.
    max_id_chars: int = Field(default=512, ge=1)
    max_source_chars: int = Field(default=4_096, ge=1)
    max_results: int = Field(
        default=10_000, ge=1, description="the most k, limit or max_items one call may ask for"
    )
    embed_timeout_seconds: float = Field(
        default=60.0, gt=0, description="an embedder call slower than this fails the call"
    )
    dedup_similarity: float | None = Field(
        default=0.95, description="near-duplicates at or above this cosine strengthen instead"
    )


class Policy(BaseModel):
    """All defaults of DESIGN.md; override any section, e.g. Policy(budget=BudgetShares(...))."""

    model_config = _FROZEN

    decay: DecayPolicy = DecayPolicy()
    scoring: ScoringWeights = ScoringWeights()
    fusion: FusionWeights = FusionWeights()
    budget: BudgetShares = BudgetShares()
    retrieval: RetrievalPolicy = RetrievalPolicy()
    associations: AssociationPolicy = AssociationPolicy()
    tiers: TierPolicy = TierPolicy()
    archival: ArchivalPolicy = ArchivalPolicy()
    consolidation: ConsolidationPolicy = ConsolidationPolicy()
    limits: Limits = Limits()
    maintenance_interval: timedelta = timedelta(hours=6)
