"""stockade: run any command inside the operating system's own sandbox, from a per-project TOML policy."""
