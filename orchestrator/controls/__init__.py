"""The chat controls (architecture §5 "Chat controls"): per-chat settings, usage and cost,
budgets and rate limits, as pure cores the commands and the turn loop call."""
