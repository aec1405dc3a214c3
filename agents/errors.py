"""Errors an agent run can end with, split by whether a retry could help."""


class AgentError(Exception):
    """Base class for failures the agent reports through its callback."""

    retryable = True


class DocumentError(AgentError):
    """The document itself cannot be processed (empty, corrupt, encrypted, not a PDF, no text)."""

    # Retrying the same bytes gives the same answer, so the orchestrator must not try again.
    retryable = False


class ExtractionError(AgentError):
    """The extractor could not produce a valid result (model errors, invalid output)."""

    retryable = True


class ConfigurationError(AgentError):
    """The agent was started without a setting it needs (endpoint, model, secret)."""

    retryable = True


class EndpointRefused(ExtractionError):
    """The model endpoint refused the agent itself (HTTP 401, 403, 404: bad key, no access, unknown
    model): every document would get the same answer, so neither a retry nor another task helps."""

    retryable = False
    agent_cannot_run = True

class Stopped(AgentError):
    """The orchestrator asked the run to end (SIGTERM: its task was cancelled or taken back)."""

    retryable = True
