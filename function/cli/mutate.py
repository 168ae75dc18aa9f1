"""sack8s mutate (placeholder until implemented)."""

COMMANDS: list = []
