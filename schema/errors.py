"""The engine's exceptions: each names what was wrong, and none leaves anything written."""


class QuireError(Exception):
    """Base of every error the engine raises on purpose."""


class InvalidArgument(QuireError, ValueError):
    """An argument is outside what the engine accepts (priority, estimate, name, ...)."""


class InvalidPayload(InvalidArgument):
    """A callback body that does not match the callback contract."""


class NotFound(QuireError, LookupError):
    """Something referred to by id or name does not exist."""


class UnknownAgent(NotFound):
    """No agent of that name is configured."""


class UnknownTask(NotFound):
    """No task has that id."""


class UnknownAttempt(NotFound):
    """No attempt has that id."""


class InvalidTransition(QuireError):
    """The task's state does not allow the requested change (cancel a completed task, ...)."""


class TransactionInProgress(QuireError):
    """An engine call was made on a connection already inside a transaction."""


class NoDatabase(QuireError):
    """A command that only reads found no database where it looked (and must not create one)."""
