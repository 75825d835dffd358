"""The canonical state: JSONL event files under a store's `events/`, one writer per file,
appended with fsync, read line by line through one classifier."""
