"""Requests the API cannot read, answered in plain words: a 422 whose `detail` is one sentence a
person can act on (which field, what it takes), not the validator's list of types and locations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

# Field names as people say them; others are spelled out from their snake_case.
FIELD_WORDS = {
    "monthly_llm_budget_usd": "The monthly LLM budget", "task_ids": "The task ids", "task_id": "The task id",
    "batch_id": "The batch id", "review_id": "The review id", "until": "The time to resume",
    "date_from": "The “from” date", "date_to": "The “to” date", "max_tasks": "The customer's task ceiling",
    "guaranteed_tasks": "The customer's guaranteed tasks", "extractor": "The extractor", "model": "The model",
    "priority": "The priority", "reason": "The reason", "agent": "The agent", "customer": "The customer",
    "files": "The files", "pages": "A file's page count", "document_bytes": "A file's size",
    "per_page": "Rows per page", "after": "The event id to start after", "cursor": "The page cursor",
}
# Where a value was, as people say it.
PLACES = {"body": "", "query": "", "path": "", "header": "", "cookie": ""}


def field_words(loc: Sequence[Any]) -> str:
    """The field a validation error is about, in words ("The task ids", "Item 3 of the task ids")."""
    parts = [p for p in loc if p not in PLACES]
    names = [p for p in parts if isinstance(p, str)]
    if not names:
        return "The request body"
    name = names[-1]
    words = FIELD_WORDS.get(name) or "The " + name.replace("_", " ")
    index = next((p for p in reversed(parts) if isinstance(p, int)), None)
    if index is not None and parts and isinstance(parts[-1], int):
        return f"Item {index + 1} of {words[0].lower() + words[1:]}"
    return words


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def plain_message(error: dict[str, Any]) -> str:
    """One validation error as a sentence."""
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    message = str(error.get("msg", ""))
    if kind == "value_error":  # our own validators already speak plainly (app.api.limits)
        text = message.removeprefix("Value error, ")
        return text[:1].upper() + text[1:]
    what = field_words(error.get("loc") or ())
    if kind == "missing":
        return f"{what} is required"
    if kind in ("json_invalid", "model_attributes_type", "dict_type", "model_type"):
        return "The request body must be a JSON object" if what == "The request body" else f"{what} must be an object"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{what} must be a whole number"
    if kind in ("float_parsing", "float_type", "decimal_parsing", "decimal_type"):
        return f"{what} must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return f"{what} must be true or false"
    if kind in ("string_type", "string_sub_type"):
        return f"{what} must be text"
    if kind in ("list_type", "tuple_type", "set_type"):
        return f"{what} must be a list"
    if kind in ("datetime_parsing", "datetime_type", "datetime_from_date_parsing", "date_parsing", "date_type"):
        return f"{what} must be a date and time such as 2026-01-31T18:00:00Z"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {"greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt"),
                 "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}[kind]
        return f"{what} must be {words[0]} {_number(ctx.get(words[1]))}"
    if kind in ("string_too_short",):
        return f"{what} must not be empty" if ctx.get("min_length") == 1 else \
            f"{what} must be at least {_number(ctx.get('min_length'))} characters long"
    if kind in ("string_too_long",):
        return f"{what} must be at most {_number(ctx.get('max_length'))} characters long"
    if kind in ("too_short",):
        return f"{what} must have at least {_number(ctx.get('min_length'))} item" + \
            ("" if ctx.get("min_length") == 1 else "s")
    if kind in ("too_long",):
        return f"{what} may have at most {_number(ctx.get('max_length'))} items"
    if kind in ("literal_error", "enum"):
        return f"{what} must be one of {ctx.get('expected', 'the values listed in the API docs')}"
    if kind == "extra_forbidden":
        return f"{what} is not a field this request takes"
    return f"{what}: {message[:1].lower() + message[1:]}"


def plain_detail(errors: Sequence[dict[str, Any]]) -> str:
    """Every validation error of a request, as sentences (the same one said once)."""
    sentences = list(dict.fromkeys(plain_message(e) for e in errors))
    return ". ".join(s.rstrip(".") for s in sentences) + "." if sentences else "The request could not be read."


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": plain_detail(exc.errors())})


def install(app) -> None:
    """Answers every request the API's models refuse in plain words."""
    app.add_exception_handler(RequestValidationError, _validation_error)
