"""The tools a model may call (architecture §5): the registry, built-ins, MCP servers, approvals."""
