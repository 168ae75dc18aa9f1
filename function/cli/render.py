"""sack8s render (placeholder until implemented)."""

COMMANDS: list = []
