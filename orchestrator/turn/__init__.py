"""A turn (architecture §5): one inbound message, rounds of model calls and tools, one reply."""
