"""What the MCP tools take and return: scopes, output budgets, parameter types and the pydantic
result models whose schemas agents see.

Every result derives from `Result`, whose `warnings` carry what the library warned about
during the call (e.g. recall fell back to words only). Lists in results are bounded
(`OUTPUT_CHARS`, `ITEM_CHARS`, `LIST_ITEMS`) and say when they were cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from ..base import vocab

SCOPES = ("memory:read", "memory:write", "session:write")
READ, WRITE, SESSION = SCOPES
OUTPUT_CHARS = 24_000  # budget for the JSON of one result's items
ITEM_CHARS = 2_000  # a memory's content in lists and search results
FULL_CHARS = 100_000  # a memory's content on its own (memory_get)
LIST_ITEMS = 100  # items of each list of a checkpoint (the latest; the first of `next`)


# The closed vocabularies as the types of tool parameters (declared in engram.base.vocab). Built
# at run time, so a type checker sees them as text; the SDK's schemas see the closed lists.
if TYPE_CHECKING:
    Kind: TypeAlias = str
    Source: TypeAlias = str
    TaskStatus: TypeAlias = str
    ProgressStatus: TypeAlias = str
    Outcome: TypeAlias = str
    Interruption: TypeAlias = str
    Depth: TypeAlias = str
    Restore: TypeAlias = str
    SessionState: TypeAlias = str
else:
    Kind = Literal[vocab.MEMORY_KIND.names]
    Source = Literal[vocab.SOURCE.names]
    TaskStatus = Literal[vocab.TASK_STATUS.names]
    ProgressStatus = Literal[vocab.PROGRESS_STATUS.names]
    Outcome = Literal[vocab.OUTCOME.names]
    Interruption = Literal[vocab.INTERRUPTION.names]
    Depth = Literal[vocab.DEPTH.names]
    Restore = Literal[vocab.RESTORE.names]
    SessionState = Literal[vocab.SESSION_STATE.names]


Id = Annotated[str, Field(description="A memory id, or any unique prefix of 4+ characters.")]
TaskRef = Annotated[
    str,
    Field(description="A task id (or unique prefix of 4+ characters), or the task's exact name."),
]
Tags = Annotated[list[str], Field(description='Tags (lower-cased); e.g. ["db", "testing"].')]


# -- results ---------------------------------------------------------------------------------


class Result(BaseModel):
    warnings: list[str] = Field(
        default_factory=list,
        description="Things to know about this answer (e.g. recall fell back to words only).",
    )


class ReceiptIndex(BaseModel):
    memory: str
    words: Literal["indexed", "pending", "missing"] = Field(
        description="pending: the next recall adds it to the word index."
    )
    vectors: Literal["saved", "pending", "missing", "off"] = Field(
        description="pending: recall scores it anyway, from the embedding cache."
    )


class ReceiptView(BaseModel):
    event: str = Field(description="The event's id (memory_receipt answers for it later).")
    kind: str
    store: str = Field(description="personal or project")
    file: str = Field(description="The event file, relative to the store.")
    line: int
    committed: str | None = Field(description="The commit that holds its line; null: not yet.")
    branch: str | None
    upstream: str | None = Field(description="The branch's upstream, e.g. origin/main.")
    pushed: bool | None = Field(
        description="Its commit is on the upstream (as of the last fetch); null: no remote."
    )
    next: str = Field(description="What is still to happen to it, and what makes it happen.")
    indexed: ReceiptIndex | None = None


class Receipted(Result):
    receipts: list[ReceiptView] = Field(
        default_factory=list,
        description="For a write: each event it appended, where it is, "
        "and whether it is committed and pushed yet.",
    )


class MemoryView(BaseModel):
    id: str
    kind: str
    content: str
    content_truncated: bool = Field(
        False, description="The content was cut; memory_get has all of it."
    )
    tags: list[str]
    scope: str | None
    store: str | None = Field(description="personal or project")
    status: str = Field(description="active, forgotten or superseded")
    importance: float
    source: str
    task: str | None
    created_at: str
    updated_at: str
    created_by: str
    version: int
    valid_from: str | None
    valid_until: str | None
    supersedes: list[str]
    superseded_by: str | None
    forgotten_reason: str | None
    reinforced: int
    cites: list[str] = Field([], description="The tracked files it names, pinned when written.")
    freshness: str | None = Field(
        None,
        description="Whether those files changed since: fresh, "
        "changed, moved, missing, or unknown (this "
        "clone cannot say); none when it cites "
        "nothing.",
    )
    stale_because: str | None = Field(
        None, description="What changed, for a stale memory: check it before relying on it."
    )


class Related(BaseModel):
    id: str
    similarity: float
    summary: str


class RememberResult(Receipted):
    memory: MemoryView
    duplicate: bool = Field(
        description="True when an existing near-duplicate was reinforced "
        "instead of adding a memory; `memory` is that one."
    )
    related: list[Related] = Field(
        description="Close but different memories: possible contradictions."
    )
    note: str


class RecallHit(BaseModel):
    memory: MemoryView
    score: float
    relevance: float
    strength: float


class RecallResult(Result):
    query: str
    hits: list[RecallHit]
    truncated: bool = Field(description="Some hits were left out to keep the answer short.")
    partial: bool = Field(
        default=False,
        description="Some memories have no embedding yet and "
        "were matched by words only; they are being embedded in the "
        "background, so a later call finds more.",
    )
    unembedded: int = Field(default=0, description="How many memories were not embedded yet.")
    note: str | None = None


class MemoryList(Result):
    memories: list[MemoryView]
    truncated: bool
    note: str | None = None


class Version(BaseModel):
    event: str
    kind: str
    time: str
    actor: str
    memory: MemoryView


class MemoryResult(Receipted):
    memory: MemoryView
    history: list[Version] | None = Field(
        None, description="Every version, oldest first (when asked for)."
    )
    truncated: bool = False
    note: str | None = None


class ForgetResult(Receipted):
    memory: MemoryView = Field(description="The retired memory.")
    replacement: MemoryView | None = Field(
        description="The memory that supersedes it, when replace_with was given."
    )


class ClusterMember(BaseModel):
    id: str
    summary: str


class Cluster(BaseModel):
    store: str
    members: list[ClusterMember]
    content: str
    kind: str
    tags: list[str]
    importance: float
    merged_into: str | None


class ConsolidateResult(Receipted):
    applied: bool
    clusters: list[Cluster]
    truncated: bool
    note: str


class StoreStats(BaseModel):
    store: str
    path: str
    memories: int
    forgotten: int
    superseded: int
    events: int
    by_kind: dict[str, int]
    by_scope: dict[str, int]
    average_strength: float | None
    decayed: int
    index_current: bool | None
    index: dict[str, Any] | None


class RuntimeView(BaseModel):
    version: str
    session: str | None = Field(description="The agent session this server opened.")
    agent: str | None
    client: str | None = Field(description="The client's name, as it introduced itself.")
    actor: str | None = Field(description="Who the events you write are attributed to.")
    scopes: list[str]
    cwd: str
    stores: list[str]
    embedding_model_loaded: bool
    uptime_seconds: float
    interruptions_found: list[str] = Field(description="Sessions found interrupted at start.")
    problems: list[str]


class StatsResult(Result):
    stores: list[StoreStats]
    runtime: RuntimeView


class ProgressView(BaseModel):
    feature: str
    status: str
    note: str | None
    component: str | None
    files: list[str]
    time: str
    actor: str


class FailureView(BaseModel):
    error: str
    component: str | None
    root_cause: str | None
    fix: str | None
    time: str
    actor: str
    candidate: str | None = Field(
        default=None,
        description=("The failed command client hooks captured that this failure is about."),
    )


class WorkingFile(BaseModel):
    path: str
    commit: str | None


class WorkingSet(BaseModel):
    files: list[WorkingFile] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)


class CheckpointView(BaseModel):
    """A continuation package. Each list holds at most 100 items (the latest ones; the first
    100 next steps)."""

    checkpoint: str
    seq: int
    reason: str
    summary: str
    goal: str
    completed: list[str]
    in_progress: list[str]
    blocked: list[str]
    next: list[str]
    must_not_redo: list[str]
    must_preserve: list[str]
    open_questions: list[str]
    working_set: WorkingSet
    confidence: float
    time: str
    actor: str
    session: str | None


class TaskView(BaseModel):
    id: str
    name: str
    goal: str
    status: str
    parent: str | None
    tags: list[str]
    store: str | None
    created_at: str
    updated_at: str
    created_by: str
    progress: list[ProgressView] = Field(description="Newest last; the latest 50 at most.")
    failures: list[FailureView] = Field(description="Newest last; the latest 50 at most.")
    checkpoints: int = Field(description="How many checkpoints the task has.")
    latest_checkpoint: CheckpointView | None


class TaskSummary(BaseModel):
    id: str
    name: str
    status: str
    goal: str
    parent: str | None
    tags: list[str]
    updated_at: str
    latest_summary: str | None = Field(description="The latest checkpoint's summary.")


class EarlierFailure(BaseModel):
    task: str
    task_name: str
    error: str
    component: str | None
    root_cause: str | None
    fix: str | None
    time: str


class TaskResult(Receipted):
    task: TaskView
    memories: list[MemoryView] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    checkpoints: list[CheckpointView] | None = None
    truncated: bool = False
    note: str | None = None


class TaskChange(Receipted):
    task: TaskSummary
    checkpoint: CheckpointView | None = Field(None, description="A checkpoint this saved, if any.")
    earlier_failures: list[EarlierFailure] = Field(
        default_factory=list,
        description="Failures already recorded on the same component "
        "(any task): do not repeat them.",
    )


class TaskList(Result):
    tasks: list[TaskSummary]
    truncated: bool


class ContinuityResult(Result):
    task: str
    before: int
    after: int
    goal_retention: float
    action_consistency: float
    failure_recall: float
    working_set_stability: float
    replanning_rate: float
    redundant_exploration: float
    composite: float


class HandoffResult(Receipted):
    task: str
    checkpoint: CheckpointView
    note: str


class ResumeResult(Result):
    task: str | None
    confidence: float | None
    truncated: bool
    markdown: str


class SessionView(BaseModel):
    id: str
    agent: str
    actor: str
    machine: str | None
    state: str = Field(description="open, ended or interrupted")
    started_at: str
    ended_at: str | None
    outcome: str | None
    how: str | None
    reason: str | None = Field(description="Why it was interrupted.")
    reported: str | None
    evidence: str | None
    current: bool = Field(description="This server's own session.")


class SessionList(Result):
    sessions: list[SessionView]
    truncated: bool


class ReportResult(Result):
    session: str | None
    outcome: str | None = Field(description="The outcome the session will close with.")
    interruption: str | None = Field(description="The interruption reason recorded now.")
    note: str


class CitationIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")  # as the tools' arguments (`tools`)

    path: Annotated[
        str,
        Field(
            description="File path relative to the repository root (no absolute paths, no '..')."
        ),
    ]
    start_line: Annotated[int, Field(ge=1, description="First cited line, counting from 1.")]
    end_line: Annotated[
        int | None, Field(ge=1, description="Last cited line (inclusive); default: start_line.")
    ] = None
    excerpt: Annotated[
        str | None,
        Field(description="The cited lines as you read them; if given, they must match the file."),
    ] = None


class CitationView(BaseModel):
    path: str
    start_line: int
    end_line: int
    commit: str
    excerpt_kept: bool = Field(
        description="The excerpt is stored in the memory because git "
        "cannot give it back (uncommitted lines of a "
        "tracked file). Never for an untracked or ignored "
        "file: warnings then say so."
    )


class CitationCheckView(CitationView):
    status: Literal["valid", "moved", "broken", "unknown"]
    reason: str
    moved_to: list[dict[str, int]]


class DiscoveryResult(Receipted):
    memory: MemoryView
    fact: str
    citations: list[CitationView]
    duplicate: bool


class DiscoveryCheck(BaseModel):
    id: str
    fact: str
    status: Literal["valid", "moved", "broken", "unknown"] = Field(
        description="The worst status among its citations."
    )
    citations: list[CitationCheckView]


class CheckResult(Result):
    discoveries: list[DiscoveryCheck]
    counts: dict[str, int] = Field(description="Citations by status.")
    truncated: bool
