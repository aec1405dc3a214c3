"""Quire's heart: migrations, every SQL statement, the task state machine and connections."""
