"""ringrun, the launcher of ringcc jobs, one module per concept (docs/architecture.md)."""
