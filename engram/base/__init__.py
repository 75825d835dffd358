"""What every layer may use: errors, settings, validation, vocabularies, secret scanning and
showing store text as data. Nothing here imports from the rest of Engram."""
