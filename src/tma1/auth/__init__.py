"""Who may talk to tma1: the hook token and everything derived from it (`hooktoken`)."""
