"""sack8s serve (placeholder until implemented)."""

COMMANDS: list = []
