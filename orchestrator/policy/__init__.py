"""The outbound policy (DESIGN §4): every text that leaves for a chat crosses it."""
