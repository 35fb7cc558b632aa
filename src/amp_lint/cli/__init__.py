"""The `amp-lint` command: subcommands, options, what `check` prints."""
