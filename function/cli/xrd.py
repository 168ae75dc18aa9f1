"""sack8s xrd (placeholder until implemented)."""

COMMANDS: list = []
