"""Running the bot (architecture §6, §7): the daemon, its lifecycle, the operator's servers
and commands."""
