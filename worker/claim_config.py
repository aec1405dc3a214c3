"""How much one worker claims and runs at once: the claim loop's settings, checked once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClaimerConfig:
    """How much one worker runs at once and how often it looks for work without being woken."""

    concurrency: int
    poll_seconds: float = 10.0
    max_batch: int = 512
    max_remote_runs: int = 100
    # After a wake-up, how long to let more slots free and more work arrive before claiming.
    gather_seconds: float = 0.002
    # Ended runs that may wait for their settlement without holding a slot: a few settlement
    # batches' worth, so that claiming goes on while one batch is being settled.
    unsettled_runs: int = 384
    # How long one service round may go on claiming while every claim fills and slots free again.
    burst_seconds: float = 0.25
    # When the runs a round started have all ended by the next round (runs shorter than a claim's
    # round trip), a claim also takes up to this many times the slots more, which start as slots
    # free (worker/ahead.py); 0: claims take only the free slots.
    claim_ahead: int = 2
    # A task claimed ahead that found no slot this long goes back to the queue, its attempt not counted.
    ahead_wait_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.max_batch < 1 or self.max_remote_runs < 0 or self.unsettled_runs < 0:
            raise ValueError("concurrency and max_batch must be at least 1, max_remote_runs and "
                             "unsettled_runs not negative")
        if self.poll_seconds <= 0 or self.gather_seconds < 0 or self.burst_seconds < 0:
            raise ValueError("poll_seconds must be positive, gather_seconds and burst_seconds not negative")
        if self.claim_ahead < 0 or self.ahead_wait_seconds <= 0:
            raise ValueError("claim_ahead must not be negative, ahead_wait_seconds must be positive")
