"""The public API: `Engram` (a facade over the personal store and the project store, in
`facade.py`) and the declared types of its results.

    from engram.api import Engram

    with Engram() as engram:
        report = engram.verify()
        report.ok
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from ..domain.receipts import Indexed, Receipt
    from ..domain.records import EntityRecord, EventRecord, MemoryRecord, Record
    from ..domain.verify import VerifyReport
    from ..domain.workspace import CommitResult
    from ..storage.events import written_by
    from .facade import Engram

# Where each public name lives: imported when first asked for, so that a command loads only
# what it uses (`from engram.api import Engram` loads the facade, not every service).
_WHERE = {
    "Browse": "..domain.browse",
    "Checkpoint": "..domain.continuity.handoffs",
    "CommitResult": "..domain.workspace",
    "ContinuityScore": "..domain.continuity.service",
    "DoctorReport": "..domain.doctor.report",
    "EarlierFailure": "..domain.continuity.service",
    "EffectiveSetting": "..domain.maintenance",
    "Engram": ".facade",
    "EntityRecord": "..domain.records",
    "EventRecord": "..domain.records",
    "ExportReport": "..domain.interop.service",
    "Handoff": "..domain.continuity.handoffs",
    "HandoffPackage": "..domain.continuity.handoffs",
    "ImportReport": "..domain.interop.service",
    "IndexRefresh": "..domain.maintenance",
    "IndexState": "..domain.maintenance",
    "Indexed": "..domain.receipts",
    "JsonlExport": "..domain.interop.service",
    "MarkdownExport": "..domain.interop.service",
    "MemoryRecord": "..domain.records",
    "MergePlan": "..domain.memories",
    "MissingReadModel": "..domain.maintenance",
    "Receipt": "..domain.receipts",
    "Record": "..domain.records",
    "ReindexReport": "..domain.maintenance",
    "Remembered": "..domain.memories",
    "SettingValue": "..base.config",
    "StoreIndexState": "..domain.maintenance",
    "StoreStatistics": "..domain.maintenance",
    "StoreStatus": "..domain.maintenance",
    "Superseded": "..domain.memories",
    "TaskChange": "..domain.continuity.service",
    "TaskView": "..domain.continuity.service",
    "VerifyReport": "..domain.verify",
    "commit_message": "..domain.messages",
    "describe": "..domain.messages",
    "written_by": "..storage.events",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Browse",
    "Checkpoint",
    "CommitResult",
    "ContinuityScore",
    "DoctorReport",
    "EarlierFailure",
    "EffectiveSetting",
    "Engram",
    "EntityRecord",
    "EventRecord",
    "ExportReport",
    "Handoff",
    "HandoffPackage",
    "ImportReport",
    "IndexRefresh",
    "IndexState",
    "Indexed",
    "JsonlExport",
    "MarkdownExport",
    "MemoryRecord",
    "MergePlan",
    "MissingReadModel",
    "Receipt",
    "Record",
    "ReindexReport",
    "Remembered",
    "SettingValue",
    "StoreIndexState",
    "StoreStatistics",
    "StoreStatus",
    "Superseded",
    "TaskChange",
    "TaskView",
    "VerifyReport",
    "commit_message",
    "describe",
    "written_by",
]
