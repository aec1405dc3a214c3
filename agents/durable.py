"""The signed report a job leaves beside its document in the Volume, read back if its callback fails.

The file holds the exact callback body and its signature, so whoever reads it checks it with the
attempt's key exactly as the callback route would (docs/CONTRACTS.md).
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from agents.callback import encode, sign

log = logging.getLogger(__name__)

REPORT_SUFFIX = ".quire-report"


def is_volume_path(document: str) -> bool:
    """Whether a document lives in a Unity Catalog Volume (reached through the Files API)."""
    return document.startswith("/Volumes/")


def report_path(document: str, attempt_id: int) -> str:
    """Where an attempt's report is kept: beside the document, one file per attempt."""
    return f"{document}{REPORT_SUFFIX}-{int(attempt_id)}.json"


def report_file(attempt_id: int, payload: dict[str, Any], secret: str) -> bytes:
    """The file's bytes: the signed body as sent by callback, with its signature."""
    body = encode(payload).decode()
    return json.dumps({"attempt_id": int(attempt_id), "signature": sign(body.encode(), secret),
                       "body": body}, ensure_ascii=False).encode()


def write_report(client: Any, document: str, attempt_id: int, payload: dict[str, Any],
                 secret: str) -> str:
    """Uploads the signed report beside the document through the Files API; returns its path."""
    path = report_path(document, attempt_id)
    client.files.upload(path, io.BytesIO(report_file(attempt_id, payload, secret)), overwrite=True)
    return path


def parse_report_file(data: bytes) -> tuple[int, bytes, str]:
    """(attempt id, raw body, signature) of a report file; ValueError if it is not one."""
    try:
        outer = json.loads(data)
        attempt_id, body, signature = outer["attempt_id"], outer["body"], outer["signature"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a Quire report file: {exc}") from None
    if not isinstance(attempt_id, int) or not isinstance(body, str) or not isinstance(signature, str):
        raise ValueError("not a Quire report file: wrong field types")
    return attempt_id, body.encode(), signature
