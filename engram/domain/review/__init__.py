"""What a range of commits changed in a store, as a reviewer reads it (`engram diff`).

`summary` folds the events a range added into memories added, updated, superseded and
forgotten, tasks created and moved, progress, failures and handoffs, by author; `render` writes
it as Markdown for a pull-request comment and as one line per store.
"""
