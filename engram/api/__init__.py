"""The public API: `Engram` (a facade over the personal store and the project store, in
`facade.py`) and the declared types of its results.

    from engram.api import Engram

    with Engram() as engram:
        report = engram.verify()
        report.ok
"""

from __future__ import annotations

from ..base.config import SettingValue
from ..domain.browse import Browse
from ..domain.continuity.handoffs import Checkpoint, Handoff, HandoffPackage
from ..domain.continuity.service import ContinuityScore, EarlierFailure, TaskChange, TaskView
from ..domain.doctor.report import DoctorReport
from ..domain.interop.service import ExportReport, ImportReport, JsonlExport, MarkdownExport
from ..domain.maintenance import (
    EffectiveSetting,
    IndexRefresh,
    IndexState,
    MissingReadModel,
    ReindexReport,
    StoreIndexState,
    StoreStatistics,
    StoreStatus,
)
from ..domain.memories import MergePlan, Remembered, Superseded
from ..domain.messages import commit_message, describe
from ..domain.records import EntityRecord, EventRecord, MemoryRecord, Record
from ..domain.verify import VerifyReport
from ..domain.workspace import CommitResult
from ..storage.events import written_by
from .facade import Engram

__all__ = ["Browse", "Checkpoint", "CommitResult", "ContinuityScore", "DoctorReport",
           "EarlierFailure", "EffectiveSetting", "Engram", "EntityRecord", "EventRecord",
           "ExportReport", "Handoff", "HandoffPackage", "ImportReport", "IndexRefresh",
           "IndexState", "JsonlExport", "MarkdownExport", "MemoryRecord", "MergePlan",
           "MissingReadModel", "Record", "ReindexReport", "Remembered", "SettingValue",
           "StoreIndexState", "StoreStatistics", "StoreStatus", "Superseded", "TaskChange",
           "TaskView", "VerifyReport", "commit_message", "describe", "written_by"]
