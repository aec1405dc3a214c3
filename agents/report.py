"""The words an agent's report uses for its attempt: the callback contract's `status`. Defined here,
where reports are written, so the agents (which import nothing of the orchestrator) and the
orchestrator that applies the reports share one definition."""

from __future__ import annotations

from enum import Enum


class ReportStatus(str, Enum):
    """What an agent's report says of its attempt."""

    COMPLETED = "completed"  # it extracted a result
    FAILED = "failed"        # it could not; `retryable` says whether another attempt may
