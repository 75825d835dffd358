"""Everything that talks to git: the store's repository and its commits, sync with remotes,
the pre-commit hook, compaction of event files, and events lost to git commands."""
