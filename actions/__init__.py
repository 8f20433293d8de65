"""Guarded actions (shared/spec/guarded-actions-v1.md)."""
