"""Guarded actions (docs/spec/guarded-actions-v1.md)."""
