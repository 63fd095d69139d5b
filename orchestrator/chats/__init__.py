"""The chats' intake (architecture §3): who may talk, one queue per conversation, shared
across instances."""
