"""The extraction prompt, page chunking to a context budget, and the token estimate."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass

from agents.fields import FIELD_SPECS
from agents.layout import Page

# Document text per model call, in estimated tokens; the prompt and the answer come on top.
DEFAULT_CONTEXT_TOKENS = 16000
_PIECES = re.compile(r"[^\W\d_]+|\d+|[^\w\s]")

_KIND_HELP = {
    "text": "string",
    "date": "date string YYYY-MM-DD",
    "amount": "JSON number (no currency symbol, no thousands separator)",
    "currency": "ISO 4217 code such as EUR",
    "integer": "whole JSON number",
    "text_list": "list of strings",
    "line_items": 'list of {"description": string, "quantity": number, "unit_price": number, '
                  '"amount": number}',
}

# What each field means, where readers most often go wrong.
_DEFINITIONS = {
    "issuer": "the seller who issued the invoice (letterhead, owner of the VAT/GST number, "
              "'from'/'seller' block, legal footer), never the bill-to/ship-to/customer",
    "invoice_number": "the invoice's own number, never a VAT/GST/company ID, order or customer "
                      "number",
    "issue_date": "the invoice date, not the order, delivery or due date",
    "due_date": "the payment deadline",
    "subtotal": "the total before tax (after discounts)",
    "tax": "the total tax (VAT, GST, sales tax)",
    "total": "the amount payable including tax: subtotal + tax (- discounts + shipping) = total",
    "line_items": "the billed lines",
    "parties": "the contracting parties' names in order of introduction",
    "effective_date": "the date the contract takes effect",
    "term_months": "the initial term in months, not renewals or notice periods",
    "governing_law": "the jurisdiction, e.g. 'England and Wales', 'New York', 'Italy'",
    "total_value": "the contract's total value, not a liability cap",
    "company": "the reporting company",
    "period_end": "the last day of the reported period",
    "revenue": "revenue or turnover of the current period, in full units",
    "net_income": "net profit (negative for a loss) of the current period",
    "total_assets": "total assets at period end",
    "currency": "ISO 4217 code of the amounts",
}
_EXAMPLES = {
    "invoice": '{"issuer": "Brouwer & Zonen B.V.", "invoice_number": "2024-0387", '
               '"issue_date": "2024-03-14", "subtotal": 450.0, "tax": 94.5, "total": 544.5, '
               '"currency": "EUR"}',
    "contract": '{"parties": ["Delta Logistics Ltd", "Epsilon Retail Inc."], '
                '"effective_date": "2024-01-02", "term_months": 24, "governing_law": "New York"}',
    "financial_statement": '{"company": "Rossi S.p.A.", "period_end": "2023-12-31", '
                           '"revenue": 12500000.0, "net_income": -350000.0, "currency": "EUR"}',
}

SYSTEM_PROMPT = """You extract structured data from business documents (contracts, invoices, \
financial statements) written in English, Italian, French, German, Dutch, Spanish, Portuguese \
or other languages, and from scanned pages read by OCR.
Reply with one JSON object and nothing else, shaped as:
{"document_type": "<invoice|contract|financial_statement|other>",
 "fields": {"<field name>": {"value": <value or null>, "confidence": <number 0..1>}}}
Fields by document type (name: value type; meaning):
%s
Rules: dates as YYYY-MM-DD; amounts as plain JSON numbers in full units (apply any "in \
thousands" scale); currencies as ISO 4217 codes; a field not present in the text has value \
null and confidence 0; do not invent values; "other" documents have no fields."""


def estimate_tokens(text: str) -> int:
    """Tokens an LLM tokenizer would make of `text`, estimated without a tokenizer.

    The text is split into letter runs, digit runs and single punctuation marks. A letter
    run counts one token per started 4 characters, a digit run one per started 3 digits
    (BPE vocabularies hold numbers in short groups), each punctuation mark one token;
    whitespace is free. On English and Romance/German business prose this lands near the
    usual 4 characters per token of GPT-style tokenizers.
    """
    tokens = 0
    for piece in _PIECES.findall(text):
        if piece[0].isdigit():
            tokens += math.ceil(len(piece) / 3)
        elif piece[0].isalpha():
            tokens += math.ceil(len(piece) / 4)
        else:
            tokens += 1
    return tokens


def _schema_text() -> str:
    lines = []
    for doc_type, spec in FIELD_SPECS.items():
        if spec:
            lines.append(f"- {doc_type}:")
            lines += [f"  {name}: {_KIND_HELP[kind]}; {_DEFINITIONS.get(name, '')}".rstrip("; ")
                      for name, kind in spec.items()]
            lines.append(f"  example values: {_EXAMPLES[doc_type]}")
    return "\n".join(lines)


def system_prompt() -> str:
    """The instruction message shared by every extraction call."""
    return SYSTEM_PROMPT % _schema_text()


@dataclass(frozen=True)
class Chunk:
    """Consecutive pages sent in one model call."""

    first_page: int
    last_page: int
    text: str


def context_budget() -> int:
    """Document tokens allowed per call, from QUIRE_LLM_CONTEXT_TOKENS."""
    return max(500, int(os.environ.get("QUIRE_LLM_CONTEXT_TOKENS", DEFAULT_CONTEXT_TOKENS)))


def chunk_pages(pages: list[Page], budget: int | None = None) -> list[Chunk]:
    """Pages grouped greedily under the budget; a page larger than the budget is split by lines."""
    budget = budget or context_budget()
    chunks: list[Chunk] = []
    parts: list[str] = []
    first = last = used = 0
    for page in pages:
        for piece in _split_page(page, budget):
            size = estimate_tokens(piece)
            if parts and used + size > budget:
                chunks.append(Chunk(first, last, "\n\n".join(parts)))
                parts, used = [], 0
            if not parts:
                first = page.number
            last = page.number
            parts.append(piece)
            used += size
    if parts:
        chunks.append(Chunk(first, last, "\n\n".join(parts)))
    return chunks


def _split_page(page: Page, budget: int) -> list[str]:
    header = f"--- page {page.number} ---"
    text = f"{header}\n{page.text}"
    if estimate_tokens(text) <= budget:
        return [text]
    pieces, current, used = [], [header], 0
    for line in page.text.splitlines():
        size = estimate_tokens(line) + 1
        if current and used + size > budget:
            pieces.append("\n".join(current))
            current, used = [f"{header} (continued)"], 0
        current.append(line)
        used += size
    pieces.append("\n".join(current))
    return pieces


def user_message(chunk: Chunk, total_pages: int, index: int, count: int,
                 type_hint: str | None, fixed_type: str | None,
                 hint: dict | None = None) -> str:
    """The document part of one call, with what is already known about the document."""
    lines = []
    if fixed_type:
        lines.append(f"The document is a {fixed_type}. Extract its fields from this part; "
                     "use null for fields this part does not contain.")
    elif type_hint:
        lines.append(f"A keyword classifier suggests the document is: {type_hint}.")
    if hint:
        lines.append("A rule-based reader found these values; they may be wrong, so check each "
                     "against the text: " + json.dumps(hint, ensure_ascii=False, default=str))
    lines.append(f"Part {index + 1} of {count}: pages {chunk.first_page}-{chunk.last_page} "
                 f"of {total_pages}.")
    lines.append(chunk.text)
    return "\n".join(lines)


def build_messages(chunk: Chunk, total_pages: int, index: int, count: int,
                   type_hint: str | None = None, fixed_type: str | None = None,
                   hint: dict | None = None) -> list[dict]:
    """Chat messages for one extraction call."""
    return [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": user_message(chunk, total_pages, index, count, type_hint,
                                                 fixed_type, hint)},
    ]


_ONLY = ("The document is a {doc_type}. Fill only these fields: {names}; give every other field "
         "null. A rule-based reader proposed these candidates, each with its confidence and the "
         "text it read it from; they are doubtful, so check each against the document: {candidates}")


def build_field_messages(chunk: Chunk, total_pages: int, index: int, count: int, doc_type: str,
                         wanted: list[str], candidates: dict) -> list[dict]:
    """Chat messages asking for only the `wanted` fields, with the rules' doubtful candidates."""
    ask = _ONLY.format(doc_type=doc_type, names=", ".join(wanted),
                       candidates=json.dumps(candidates, ensure_ascii=False, default=str))
    text = (f"{ask}\nPart {index + 1} of {count}: pages {chunk.first_page}-{chunk.last_page} "
            f"of {total_pages}.\n{chunk.text}")
    return [{"role": "system", "content": system_prompt()}, {"role": "user", "content": text}]


def estimate_messages(messages: list[dict]) -> int:
    """Estimated prompt tokens of chat messages (content plus a few per message for roles)."""
    return sum(estimate_tokens(m["content"]) + 4 for m in messages)


def estimate_json(value: object) -> int:
    """Estimated tokens of a JSON answer."""
    return estimate_tokens(json.dumps(value, ensure_ascii=False))
