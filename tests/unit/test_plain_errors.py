"""Requests the API's models refuse are answered in plain words: real pydantic errors from the API's
own models and types, turned into sentences that name the field as a person would."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, Field, ValidationError

from app.api import limits
from app.api.errors import field_words, plain_detail

SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


class Budget(BaseModel):
    monthly_llm_budget_usd: limits.Dollars = Field(...)


class Positions(BaseModel):
    task_ids: list[limits.TaskId] = Field(..., min_length=1, max_length=3)


class Page(BaseModel):
    limit: int = Field(50, ge=1, le=500)
    priority: limits.Priority = 5


def _detail(model, data) -> str:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return plain_detail(caught.value.errors())


@pytest.mark.parametrize(("model", "data", "expected"), [
    (Budget, {}, "The monthly LLM budget is required."),
    (Budget, {"monthly_llm_budget_usd": "12"},
     "The monthly LLM budget must be a number of dollars (or null for none), not '12'."),
    (Positions, {"task_ids": []}, "The task ids must have at least 1 item."),
    (Positions, {"task_ids": [1, 2, 3, 4]}, "The task ids may have at most 3 items."),
    (Positions, {"task_ids": [1, 0]}, "A task id is a whole number from 1 to 9,223,372,036,854,775,807, not '0'."),
    (Page, {"limit": 0}, "The limit must be at least 1."),
    (Page, {"limit": 5000}, "The limit must be at most 500."),
    (Page, {"limit": "many"}, "The limit must be a whole number."),
    (Page, {"priority": 12}, "The priority must be a whole number from 0 to 9, not '12'."),
])
def test_a_refused_value_reads_as_a_sentence_naming_the_field(model, data, expected):
    detail = _detail(model, data)
    assert detail == expected
    assert not SNAKE.search(detail), detail  # never a field's code name


def test_several_errors_are_said_once_each():
    detail = _detail(Page, {"limit": 0, "priority": 12})
    assert detail == "The limit must be at least 1. The priority must be a whole number from 0 to 9, not '12'."


def test_fields_are_named_as_people_say_them():
    assert field_words(("body", "monthly_llm_budget_usd")) == "The monthly LLM budget"
    assert field_words(("body", "task_ids", 2)) == "Item 3 of the task ids"
    assert field_words(("query", "per_page")) == "Rows per page"
    assert field_words(("query", "some_flag")) == "The some flag"
    assert field_words(("body",)) == "The request body"
