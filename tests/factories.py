"""Builders for agents and tasks with keyword overrides."""

from __future__ import annotations

import itertools

from schema import queue

_seq = itertools.count(1)


def make_agent(conn, name: str = "docs", **overrides):
    limits = {k: overrides.pop(k, None) for k in ("max_concurrent_tasks", "max_tpm")}
    return queue.configure_agent(conn, name, **limits, **overrides)


def make_task(conn, agent: str = "docs", **overrides):
    n = next(_seq)
    # Bulk (0) unless a test names a priority: tests order their tasks against that floor.
    fields = {"document_uri": f"file:///docs/doc-{n}.pdf", "document_name": f"doc-{n}.pdf",
              "estimated_tokens": 1000, "priority": 0}
    fields.update(overrides)
    return queue.enqueue(conn, agent=agent, **fields)
