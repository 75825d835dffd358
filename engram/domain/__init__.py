"""What Engram does: memories, continuity (tasks, checkpoints, sessions), import and export,
discovery, the timeline and the store doctor, over the read model, search and git layers."""
