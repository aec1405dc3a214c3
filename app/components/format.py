"""How numbers, money, durations and times read on every page."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from schema.models import AttemptStatus, TaskStatus

DASH = "—"

# Keyed by the status's stored word, as rows and events carry it.
STATUS_COLORS = {
    TaskStatus.ENQUEUED.value: "blue-grey-6", TaskStatus.PROCESSING.value: "indigo-6",
    TaskStatus.COMPLETED.value: "positive", TaskStatus.FAILED.value: "negative",
    TaskStatus.CANCELLED.value: "orange-8",
}
SUBMITTED = "submitted"  # the throughput chart's series of new tasks, beside the statuses they ended in
STATUS_HEX = {
    TaskStatus.ENQUEUED.value: "#78909c", TaskStatus.PROCESSING.value: "#3949ab",
    TaskStatus.COMPLETED.value: "#21ba45", TaskStatus.FAILED.value: "#c10015",
    TaskStatus.CANCELLED.value: "#ef6c00", SUBMITTED: "#1e3a5f",
}
STATUS_ICONS = {
    TaskStatus.ENQUEUED.value: "schedule", TaskStatus.PROCESSING.value: "autorenew",
    TaskStatus.COMPLETED.value: "check_circle", TaskStatus.FAILED.value: "error",
    TaskStatus.CANCELLED.value: "block",
}


def llm_cost(attempts) -> str:
    """A task's LLM cost over its attempts; "unpriced" when tokens were spent with no price, never $0."""
    if not attempts:
        return DASH
    known = sum((a.llm_cost_usd or 0) for a in attempts)
    if not known and not any(a.llm_unpriced or (a.input_tokens or 0) + (a.output_tokens or 0) for a in attempts):
        return "no LLM used"
    if any(a.llm_unpriced for a in attempts):
        return f"{money(known)} + unpriced" if known else "unpriced"
    return money(known)


def compute_cost(attempts) -> str:
    """A task's compute cost over its attempts: "pending" while billing has not priced a job run,
    "unpriced" for DBUs with no list price, "provisional" while billing may still correct it,
    "never billed" for a job run billing never reported."""
    if not attempts:
        return DASH
    known = sum((a.compute_cost_usd or 0) for a in attempts)
    dbus = sum((a.dbus or 0) for a in attempts)
    states = {getattr(a, "compute_state", None) for a in attempts}
    text = money(known) + (f" ({float(dbus):,.2f} DBU)" if dbus else "")
    notes = [note for note, present in (("pending", "pending" in states),
                                        ("unpriced", any(getattr(a, "compute_unpriced", False) for a in attempts)))
             if present]
    if notes:
        return f"{text} + {' + '.join(notes)}" if known or dbus else " + ".join(notes)
    if not known and not dbus and "unbilled" in states:
        return "never billed"
    return f"{text} (provisional)" if "billed" in states else text


def money(value: Decimal | float | None) -> str:
    """US dollars; sub-dollar amounts keep four decimals, since per-document LLM cost is often cents."""
    if value is None:
        return DASH
    amount = float(value)
    if amount == 0:
        return "$0.00"
    if abs(amount) < 1:
        return f"${amount:,.4f}"
    return f"${amount:,.2f}"


def count(value: int | float | None) -> str:
    return DASH if value is None else f"{int(value):,}"


def approx(value: int) -> str:
    """A count rounded for an estimate: 1.2M, 35k, 870."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:,}"


def tokens(value: int | float | None) -> str:
    return count(value)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    if seconds < 1:
        return f"{seconds * 1000:,.0f} ms"
    if seconds < 60:
        return f"{seconds:,.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def percent(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.0f}%"


def when(moment: datetime | None) -> str:
    """A timestamp in UTC, to the second."""
    if moment is None:
        return DASH
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def until(moment: datetime, now: datetime | None = None) -> str:
    """When something ends, as a person says it: "in 40 s", "in 3 h 05 min", or the time past a day."""
    now = now or datetime.now(UTC)
    seconds = (moment - now).total_seconds()
    if seconds <= 0:
        return "any moment now"
    if seconds < 60:
        return f"in {max(1, round(seconds))} s"
    if seconds < 86400:
        return f"in {duration(seconds)}"
    return f"until {exact(moment)}"


def exact(moment: datetime | None) -> str:
    """A timestamp in UTC to the second, saying so: the text behind a relative time."""
    return DASH if moment is None else f"{when(moment)} UTC"


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago, as a person says it ("just now", "3 min ago", "yesterday"); a date past a week."""
    if moment is None:
        return DASH
    now = now or datetime.now(UTC)
    seconds = (now - moment).total_seconds()
    if seconds < 0:
        return "just now" if seconds > -60 else when(moment)
    if seconds < 10:
        return "just now"
    if seconds < 60:
        return f"{int(seconds)} s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    if days == 1:
        return "yesterday"
    if days < 7:
        return f"{days} days ago"
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def plural(n: int | None, word: str) -> str:
    """"1 page", "3 pages"; a dash when unknown."""
    if n is None:
        return DASH
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def size(num_bytes: int | None) -> str:
    if num_bytes is None:
        return DASH
    if num_bytes < 1000:
        return f"{num_bytes} B"
    if num_bytes < 1_000_000:
        return f"{num_bytes / 1000:,.1f} kB"
    return f"{num_bytes / 1_000_000:,.1f} MB"


def value_text(value) -> str:
    """A result field's value as a person reads it."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return f"{len(value)} items"
        return ", ".join(value_text(v) for v in value) or DASH
    return str(value)


# Attempt states in plain words where the stored word does not say enough by itself.
ATTEMPT_STATUS_WORDS = {
    AttemptStatus.PROCESSING.value: "running", AttemptStatus.LOST.value: "lost (no heartbeat)",
    AttemptStatus.SUPERSEDED.value: "superseded (another attempt finished first)",
    AttemptStatus.HANDED_BACK.value: "handed back (its worker stopped)",
}


def attempt_status(value: str) -> str:
    """An attempt's state as a person reads it."""
    return ATTEMPT_STATUS_WORDS.get(value, value.replace("_", " "))


def event_words(status: str, prev: str | None) -> tuple[str, str]:
    """A timeline entry's title and line: a status change, or a release of a held task (its status
    stays enqueued)."""
    if prev is None:
        return status, SUBMITTED
    if prev == status == TaskStatus.ENQUEUED.value:
        return "released", "released from hold: it may run now"
    if prev == TaskStatus.PROCESSING.value and status == TaskStatus.ENQUEUED.value:
        return status, "back in the queue (to run again)"
    return status, f"from {prev}"


def at_once(runs: float) -> str:
    """How many tasks run together, in whole numbers: an observed overlap of 1.99 is "about 2 at once"."""
    n = max(1, round(runs))
    text = "one at a time" if n == 1 else f"{n} at once"
    return text if abs(runs - n) < 0.05 or runs < 1 else f"about {text}"
