"""The field schema per document type, the extraction result types and value validation."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.dates import is_iso_date

# Field name -> kind, per document type, exactly as docs/CONTRACTS.md lists them.
FIELD_SPECS: dict[str, dict[str, str]] = {
    "invoice": {
        "issuer": "text", "invoice_number": "text", "issue_date": "date", "due_date": "date",
        "currency": "currency", "subtotal": "amount", "tax": "amount", "total": "amount",
        "line_items": "line_items",
    },
    "contract": {
        "parties": "text_list", "effective_date": "date", "term_months": "integer",
        "governing_law": "text", "total_value": "amount", "currency": "currency",
    },
    "financial_statement": {
        "company": "text", "period_end": "date", "currency": "currency", "revenue": "amount",
        "net_income": "amount", "total_assets": "amount",
    },
    "other": {},
}
# The fields a document cannot do without, per type: one of them missing or doubtful sends
# the document to review.
CORE_FIELDS: dict[str, tuple[str, ...]] = {
    "invoice": ("issuer", "invoice_number", "issue_date", "total", "currency"),
    "contract": ("parties", "effective_date"),
    "financial_statement": ("company", "period_end", "revenue"),
    "other": (),
}
LINE_ITEM_KEYS = ("description", "quantity", "unit_price", "amount")
_CURRENCY_CODE = re.compile(r"[A-Z]{3}")


@dataclass
class FieldValue:
    """One extracted value and how sure the extractor is of it (0 when not found).

    `stage` and `evidence` (docs/CONTRACTS.md) are set by extractors that know them; `line`
    is where in the document's flattened lines the rules read the value, a hint for finding
    its evidence, never reported.
    """

    value: Any = None
    confidence: float = 0.0
    stage: str | None = field(default=None, compare=False)
    evidence: dict[str, Any] | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False, repr=False)
    # Other values the rules read for the field nearly as confidently: doubt, never reported.
    rivals: int = field(default=0, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        out = {"value": self.value, "confidence": round(float(self.confidence), 3)}
        if self.stage is not None:
            out["stage"] = self.stage
            out["evidence"] = self.evidence
        return out


@dataclass
class Usage:
    """Tokens and LLM cost spent by a run so far; kept even when the run fails."""

    input_tokens: int = 0
    output_tokens: int = 0
    llm_cost_usd: float = 0.0
    estimated: bool = False
    unpriced: bool = False   # tokens were spent with no configured price
    rate_limited: int = 0                     # HTTP 429s the model endpoint answered
    retry_after_seconds: float | None = None  # the longest Retry-After it asked for
    rate_limited_at: float | None = None      # when the first of them came (Unix seconds)
    rate_limit_tpm: int | None = None         # the tokens a minute the endpoint said it allows, if it did

    def add(self, input_tokens: int, output_tokens: int, cost: tuple[float, float] | None) -> None:
        """Adds one call's tokens and its (input, output) cost, or None when it has no price."""
        self.input_tokens += int(input_tokens)
        self.output_tokens += int(output_tokens)
        if cost is None:
            self.unpriced = self.unpriced or bool(input_tokens or output_tokens)
        else:
            self.llm_cost_usd += float(cost[0]) + float(cost[1])

    @property
    def reported_cost_usd(self) -> float | None:
        """The cost to report: None when some usage had no price (unpriced, never $0)."""
        return None if self.unpriced else round(self.llm_cost_usd, 8)

    def note_rate_limited(self, retry_after: float | None, limit_tpm: int | None = None) -> None:
        """Counts a 429, so the orchestrator can slow this agent down: when the first came (the
        minute before it shows what the endpoint let through) and the limit it stated, if any."""
        self.rate_limited += 1
        if self.rate_limited_at is None:
            self.rate_limited_at = round(time.time(), 3)
        if retry_after is not None:
            self.retry_after_seconds = max(self.retry_after_seconds or 0.0, retry_after)
        if limit_tpm is not None:
            self.rate_limit_tpm = limit_tpm


@dataclass
class Extraction:
    """What an extractor produced for one document."""

    document_type: str
    fields: dict[str, FieldValue]
    confidence: float
    extractor: str
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    extra: dict[str, Any] = field(default_factory=dict)  # source, findings, tokens_saved
    page_sizes: list[list[float]] | None = None   # [width, height] in points, per page
    needs_review: bool | None = None
    # What the confidence model was given per field (for bench/calibrate.py, never reported).
    signals: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    def result(self, pages: int) -> dict[str, Any]:
        """The `result` object of the callback payload (docs/CONTRACTS.md)."""
        out = {
            "document_type": self.document_type,
            "extractor": self.extractor,
            "model": self.model,
            "pages": pages,
            "fields": {name: fv.as_dict() for name, fv in self.fields.items()},
            **self.extra,
        }
        if self.page_sizes is not None:
            out["page_sizes"] = self.page_sizes
        if self.needs_review is not None:
            out["needs_review"] = self.needs_review
        return out


class Extractor(Protocol):
    """Turns a read, classified document into an Extraction, adding what it spends to `usage`."""

    name: str

    def extract(self, document: Any, classification: Any, usage: Usage,
                tracer: Any) -> Extraction: ...


def empty_fields(document_type: str) -> dict[str, FieldValue]:
    """Every field of a type, not found."""
    return {name: FieldValue() for name in FIELD_SPECS[document_type]}


def validate_value(kind: str, value: Any) -> Any:
    """The value normalised to its kind's JSON type, or ValueError saying what is wrong."""
    if value is None:
        return None
    if kind == "text":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        return value.strip() or None
    if kind == "date":
        if not is_iso_date(value):
            raise ValueError(f"expected an ISO date YYYY-MM-DD, got {value!r}")
        return value
    if kind == "amount":
        return _number(value)
    if kind == "integer":
        number = _number(value)
        if number != int(number):
            raise ValueError(f"expected a whole number, got {value!r}")
        return int(number)
    if kind == "currency":
        if not isinstance(value, str) or not _CURRENCY_CODE.fullmatch(value.strip()):
            raise ValueError(f"expected an ISO 4217 code such as EUR, got {value!r}")
        return value.strip()
    if kind == "text_list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("expected a list of strings")
        return [v.strip() for v in value if v.strip()] or None
    if kind == "line_items":
        return _line_items(value)
    raise ValueError(f"unknown field kind {kind}")


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a JSON number, got {value!r}")
    return float(value)


def _line_items(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        raise ValueError("expected a list of line item objects")
    items = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"line item {index} is not an object")
        clean: dict[str, Any] = {}
        for key in LINE_ITEM_KEYS:
            raw = item.get(key)
            try:
                clean[key] = validate_value("text" if key == "description" else "amount", raw)
            except ValueError as exc:
                raise ValueError(f"line item {index} {key}: {exc}") from None
        items.append(clean)
    return items or None


def validate_fields(document_type: str, raw_fields: Any) -> tuple[dict[str, FieldValue], list[str]]:
    """Fields of `document_type` read from a model's JSON, and the problems found in it."""
    problems: list[str] = []
    fields = empty_fields(document_type)
    if not isinstance(raw_fields, dict):
        return fields, ["'fields' must be an object"]
    for name, kind in FIELD_SPECS[document_type].items():
        entry = raw_fields.get(name)
        if entry is None:
            continue
        # Accept both {"value": v, "confidence": c} and a bare value.
        if isinstance(entry, dict) and "value" in entry:
            raw, conf = entry.get("value"), entry.get("confidence", 0.8)
        else:
            raw, conf = entry, 0.8
        try:
            value = validate_value(kind, raw)
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
            continue
        if isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 <= conf <= 1:
            problems.append(f"{name}: confidence must be a number between 0 and 1")
            continue
        fields[name] = FieldValue(value, float(conf) if value is not None else 0.0)
    return fields, problems
