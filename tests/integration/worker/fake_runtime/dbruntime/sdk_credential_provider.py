"""What the Databricks runtime gives the SDK in a job: the workspace and the run's native token.

The SDK's `runtime` credentials look for this module when DATABRICKS_RUNTIME_VERSION is set. A
fake job puts it on the path with the token the fake workspace issued for the run's principal:
a PAT-like token the workspace APIs take and the Apps proxy refuses, as on Databricks.
"""

from __future__ import annotations

import os


def init_runtime_native_auth():
    host, token = os.environ.get("FAKE_DBRUNTIME_HOST"), os.environ.get("FAKE_DBRUNTIME_TOKEN")
    if not host or not token:
        return None, None
    return host, lambda: {"Authorization": f"Bearer {token}"}
