"""Where an event came from, beyond its session: this machine (`machine`) and the
repository of its working tree (`repo`)."""
