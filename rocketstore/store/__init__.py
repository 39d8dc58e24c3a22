"""The store layers: mapped file queue, CommitLog, indexes, services and MessageStore."""
