"""tma1: watch AI coding agents through their hooks and talk back into their loop."""

__version__ = "0.1.0"
