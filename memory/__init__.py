"""The scoped memory engine (shared/spec/memory-engine.md)."""
