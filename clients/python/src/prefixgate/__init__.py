"""Python client for prefixgate."""
