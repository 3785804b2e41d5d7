"""Built-in profiles, shipped as TOML files."""
