"""Bounds on the numbers and names the API accepts, each with a message in plain words (docs/APP.md,
"Limits on input"). A value out of bounds is refused with 422 before anything is read or written."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, StrictFloat, StrictInt

from schema.models import MAX_NAME_CHARS, MAX_PRIORITY, MIN_PRIORITY, is_priority

MAX_ID = 2**63 - 1                   # ids are bigint
MAX_FILE_BYTES = 10**10              # a file's size in a forecast: 10 GB, far past any upload allowed
PRIORITY_WORDS = f"The priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY}"


def _priority(value: Any) -> int:
    """0..9 from an integer or its plain digits ("5"); never a bool, "5.0", "" or 5.5."""
    if isinstance(value, bool):
        raise ValueError(PRIORITY_WORDS)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not is_priority(value):
        raise ValueError(f"{PRIORITY_WORDS}, not {str(value)[:20]!r}")
    return value


def parse_priority(value: Any) -> int:
    """The priority of a form field or query, or ValueError in plain words."""
    return _priority(value)


def _task_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        raise ValueError(f"A task id is a whole number from 1 to {MAX_ID:,}, not {str(value)[:30]!r}")
    return value


def _whole(what: str, high: int):
    """A validator of a whole number from 0 to `high`, saying `what` in its message."""
    def check(value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high):
            raise ValueError(f"{what} must be a whole number from 0 to {high:,}, not {str(value)[:30]!r}")
        return value
    return check


def _name(value: str) -> str:
    if "\x00" in value:
        raise ValueError("Names must not contain a NUL character")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"Names are at most {MAX_NAME_CHARS} characters long (this one has {len(value):,})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("Names must be valid Unicode") from None
    return value


def _dollars(value: Any) -> Any:
    """A budget must be a JSON number (or null): true is not $1, and "12" is not twelve dollars. Its
    range and its cents are the engine's to check (schema.customers)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(f"The monthly LLM budget must be a number of dollars (or null for none), "
                         f"not {str(value)[:40]!r}")
    return value


Priority = Annotated[int, BeforeValidator(_priority)]
MAX_FILE_PAGES = 100_000
FilePages = Annotated[int | None, BeforeValidator(_whole("A file's page count", MAX_FILE_PAGES))]
FileBytes = Annotated[int | None, BeforeValidator(_whole("A file's size in bytes (10 GB at most)", MAX_FILE_BYTES))]
# A scan's OCR work in standard pages: a dense page reads as about two, so ten a page is room enough.
MAX_FILE_OCR_WORK = MAX_FILE_PAGES * 10


def _ocr_work(value: Any) -> Any:
    """A JSON number of standard pages (or null): true is not one page, and "3" is not three."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not 0 <= value <= MAX_FILE_OCR_WORK):
        raise ValueError(f"A scan's OCR work must be a number of standard pages from 0 to "
                         f"{MAX_FILE_OCR_WORK:,}, not {str(value)[:30]!r}")
    return value


FileOcrWork = Annotated[float | None, BeforeValidator(_ocr_work)]
Dollars = Annotated[StrictInt | StrictFloat | None, BeforeValidator(_dollars)]
TaskId = Annotated[int, BeforeValidator(_task_id)]
Name = Annotated[str, AfterValidator(_name)]
