"""The scoped memory engine (docs/spec/memory-engine.md)."""
