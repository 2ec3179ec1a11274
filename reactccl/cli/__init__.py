"""Command line: thin layers over library calls (each subcommand in its own module)."""
