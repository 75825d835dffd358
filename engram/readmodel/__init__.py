"""The read model: a SQLite projection of a store's events, kept fresh by file stat and
rebuilt from the event files whenever it is missing or stale."""
