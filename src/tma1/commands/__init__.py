"""One module per `tma1` subcommand group."""
