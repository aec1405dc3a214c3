"""The task state machine: enqueue, claim, heartbeat, callbacks, sweep, cancel and retry.

Every call is one transaction that has committed when it returns; each takes a psycopg
connection that is not inside a transaction, and returns dataclasses from schema.models.
Callers use this package's names (`from schema import queue; queue.enqueue(...)`); each lives in
the module of its part of the machine:

- common: transactions, argument checks, the retry backoff
- agent_config: agents' configuration and pauses
- enqueueing: new tasks and their token estimates
- claiming: claims within each agent's throttles
- leases: heartbeats, the sweeper, handing a task back
- callbacks: agents' reports and the adaptive throttle
- operator_actions: cancel, retry, reading a task or an attempt
- bookkeeping: what an executor records on an attempt
"""

from __future__ import annotations

from schema.queue.agent_config import (
                                       agents_with_backlog,
                                       configure_agent,
                                       get_agent,
                                       list_agents,
                                       pause_agent,
                                       resume_agent,
)
from schema.queue.bookkeeping import record_compute, record_executor_info
from schema.queue.callbacks import (
                                       THROTTLE_CEILING_SHARE,
                                       THROTTLE_FACTOR,
                                       THROTTLE_FLOOR_TPM,
                                       THROTTLE_QUIET_SECONDS,
                                       THROTTLE_STEP,
                                       Applied,
                                       apply_callback,
                                       apply_reports,
                                       attempt_secret,
                                       throttle_back_off,
                                       throttle_recover,
)
from schema.queue.claiming import (
                                       ADMISSION_SCAN_FACTOR,
                                       ADMISSION_SCAN_MIN,
                                       admission_reopens_in,
                                       claim,
                                       claim_many,
                                       claim_throttled,
                                       clear_agent_halt,
                                       halt_agent,
)
from schema.queue.common import reads_by_index, set_backoff
from schema.queue.enqueueing import (
                                       BATCH_COLUMNS,
                                       BYTES_PER_PAGE,
                                       CHARS_PER_TOKEN,
                                       DEFAULT_ESTIMATE_PAGES,
                                       FIRST_ANALYZE_BATCH,
                                       FIRST_ANALYZE_BYTES,
                                       MAX_RESERVED_TOKENS,
                                       TEXT_TOKENS_OVERHEAD,
                                       TOKENS_OVERHEAD,
                                       TOKENS_PER_PAGE,
                                       analyze_if_never_analyzed,
                                       enqueue,
                                       enqueue_many,
                                       estimate_tokens,
)
from schema.queue.leases import hand_back, heartbeat, sweep
from schema.queue.operator_actions import EXTRACTORS, cancel, get_attempt, get_task, retry

__all__ = [
    "ADMISSION_SCAN_FACTOR", "ADMISSION_SCAN_MIN", "BATCH_COLUMNS", "BYTES_PER_PAGE", "CHARS_PER_TOKEN",
    "DEFAULT_ESTIMATE_PAGES", "EXTRACTORS", "FIRST_ANALYZE_BATCH", "FIRST_ANALYZE_BYTES", "MAX_RESERVED_TOKENS",
    "TEXT_TOKENS_OVERHEAD", "THROTTLE_CEILING_SHARE", "THROTTLE_FACTOR", "THROTTLE_FLOOR_TPM",
    "THROTTLE_QUIET_SECONDS", "THROTTLE_STEP", "TOKENS_OVERHEAD", "TOKENS_PER_PAGE",
    "Applied", "admission_reopens_in", "agents_with_backlog", "analyze_if_never_analyzed", "apply_callback",
    "apply_reports",
    "attempt_secret", "cancel", "claim", "claim_many", "claim_throttled", "clear_agent_halt", "configure_agent",
    "enqueue", "enqueue_many", "estimate_tokens", "get_agent", "get_attempt", "get_task", "halt_agent",
    "hand_back", "heartbeat", "list_agents", "pause_agent", "reads_by_index", "record_compute",
    "record_executor_info", "resume_agent", "retry", "set_backoff", "sweep", "throttle_back_off",
    "throttle_recover",
]
