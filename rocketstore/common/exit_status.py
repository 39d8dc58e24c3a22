"""Exit statuses the command line and the servers share."""

#: The exit status of a command ended by Ctrl-C, as shells report it (128 + SIGINT).
EXIT_INTERRUPTED = 130
