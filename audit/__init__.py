"""The evidence layer: one SHA-256 hash chain per scope (shared/spec/audit-log-v1.md)."""
