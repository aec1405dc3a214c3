"""Token estimate and chunking of pages to the context budget."""

import itertools

from agents.layout import Page, lines_from_text
from agents.prompt import build_messages, chunk_pages, estimate_tokens, system_prompt

PROSE = ("The Supplier shall perform the services with due care and skill, in accordance with "
         "good industry practice and the service levels agreed by the parties in writing. ")


def test_estimate_is_near_four_characters_per_token_on_prose() -> None:
    text = PROSE * 20
    ratio = len(text) / estimate_tokens(text)
    assert 3.5 <= ratio <= 5.0


def test_estimate_counts_words_digits_and_punctuation() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("cat") == 1
    assert estimate_tokens("elephant") == 2
    assert estimate_tokens("123456") == 2
    assert estimate_tokens("a, b.") == 4
    assert estimate_tokens("   \n\t ") == 0


def _pages(count: int, repeat: int) -> list[Page]:
    return [Page(n, lines_from_text(f"Clause {n}. " + PROSE * repeat)) for n in range(1, count + 1)]


def test_short_documents_fit_one_chunk() -> None:
    chunks = chunk_pages(_pages(3, 2), budget=5000)
    assert len(chunks) == 1
    assert (chunks[0].first_page, chunks[0].last_page) == (1, 3)
    assert "--- page 3 ---" in chunks[0].text


def test_long_documents_are_split_under_the_budget_in_page_order() -> None:
    pages = _pages(10, 10)
    chunks = chunk_pages(pages, budget=700)
    assert len(chunks) > 1
    assert all(estimate_tokens(c.text) <= 700 for c in chunks)
    assert chunks[0].first_page == 1 and chunks[-1].last_page == 10
    assert all(a.last_page <= b.first_page for a, b in itertools.pairwise(chunks))
    joined = "".join(c.text for c in chunks)
    assert all(f"Clause {n}." in joined for n in range(1, 11))


def test_a_page_larger_than_the_budget_is_split_by_lines() -> None:
    page = Page(1, lines_from_text("\n".join(PROSE for _ in range(40))))
    chunks = chunk_pages([page], budget=500)
    assert len(chunks) > 1
    assert all(c.first_page == c.last_page == 1 for c in chunks)
    assert "(continued)" in chunks[1].text


def test_messages_name_schema_type_hint_and_part() -> None:
    chunk = chunk_pages(_pages(1, 1), budget=5000)[0]
    messages = build_messages(chunk, total_pages=4, index=0, count=2, type_hint="contract")
    assert messages[0]["content"] == system_prompt()
    for name in ("invoice_number", "term_months", "total_assets", "line_items"):
        assert name in messages[0]["content"]
    assert "suggests the document is: contract" in messages[1]["content"]
    assert "Part 1 of 2: pages 1-1 of 4" in messages[1]["content"]
    fixed = build_messages(chunk, 4, 1, 2, type_hint="contract", fixed_type="contract")
    assert "The document is a contract" in fixed[1]["content"]
