"""aetnaweb: scoped agent memory, guarded actions and a verifiable audit chain."""
