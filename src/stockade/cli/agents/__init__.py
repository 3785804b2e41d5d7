"""The coding agents' integrations, one module per agent's rules, run in `stockade hook` and `stockade doctor`.

- `claude.py`: Claude Code's permission rules (`permissions.deny`/`ask` of its settings files),
  matched against a command as Claude Code matches them; also the command splitting the
  other agents' rules share.
- `codex.py`: Codex's `prefix_rule` files (`~/.codex/rules`, the project's).
- `codex_trust.py`: Codex's own trust of a hook (`codex app-server`), which `install` and
  `doctor` ask about.
- `gemini.py`: Gemini CLI's policy engine rules (`tools.exclude`, `[[rule]]` TOML).
- `checks.py`: `stockade doctor`'s rows for each agent's installed hook.

Cursor has no rules of its own to honour: its hook is the generic one (cli/hook.py).
Nothing here is imported unless the agent's hook or doctor asks for it.
"""
