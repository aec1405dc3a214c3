"""Stands in for the Databricks runtime's own package in a fake job's process (see sdk_credential_provider)."""


class UserNamespaceInitializer:
    """The runtime's notebook namespace: a job's Python process has none of its objects."""

    @classmethod
    def getOrCreate(cls) -> "UserNamespaceInitializer":
        return cls()

    def get_namespace_globals(self) -> dict:
        return {}
