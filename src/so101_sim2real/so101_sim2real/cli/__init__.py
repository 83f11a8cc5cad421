"""The ``so101`` subcommands of this package: argument parsing only, the work is in replay/, pairing/, analysis/."""
