"""The evidence layer: one SHA-256 hash chain per scope (docs/spec/audit-log-v1.md)."""
