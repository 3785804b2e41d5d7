"""`stockade mcp list|wrap|unwrap`: the MCP servers the agents start, each in a sandbox of its own.

`wrap` rewrites each stdio server's command in the agents' configs to run
under `stockade run --mcp NAME` (cli/agents/mcp_config.py); `stockade install`
does it for the agent it installs. `list` shows every server and whether it
is wrapped; `doctor` names the stdio servers that are not.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from stockade.cli.agents import mcp_config
from stockade.core.errors import UsageError

app = typer.Typer(no_args_is_help=True, help="The MCP servers the agents start: list them, wrap each in a sandbox of its own, or unwrap.")
AgentsArgument = Annotated[list[str] | None, typer.Argument(help="claude, codex or gemini (default: all three).", metavar="AGENT")]


def _agents(given: list[str] | None) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(given or mcp_config.AGENTS))
    unknown = [agent for agent in chosen if agent not in mcp_config.AGENTS]
    if unknown:
        raise UsageError(f"unknown agent {unknown[0]!r}: MCP servers are wrapped for {', '.join(mcp_config.AGENTS)}")
    return chosen


def _where() -> tuple[Path, Path]:
    from stockade.cli.install import project_root

    return Path(os.environ.get("HOME") or Path.home()), project_root(Path(os.getcwd()))


@app.command(name="list", help="Every MCP server the agents' configs name, and whether it runs sandboxed.")
def list_servers(agents: AgentsArgument = None) -> None:
    from stockade.cli.hook import HookError, stockade_executable

    home, project = _where()
    found = mcp_config.servers(home, project, _agents(agents))
    if not found:
        print("stockade: no MCP servers in the agents' configs for this project")
        return
    try:
        stockade: str | None = stockade_executable()
    except HookError:
        stockade = None
    for server in found:
        mine = mcp_config.ours(server.entry, server.policy, stockade)
        state = "remote" if server.remote else "sandboxed" if mine else "NOT sandboxed"
        name = server.policy
        print(f"{server.place.agent:<7} {server.name:<24} {state:<14} {server.shown}")
        if server.wrapped and not mine:
            print(f"{'':<7} {'':<24} it looks wrapped, but runs {server.entry['command']} as {server.entry['args'][2]}: `stockade mcp wrap` wraps it")
        elif mine:
            from stockade.cli.mcp_policy import policy_path

            path = policy_path(name, os.environ)
            which = path if os.path.isfile(path) else "the built-in mcp profile"
            print(f"{'':<7} {'':<24} --mcp {name}: {which}  (in {server.place.label})")
        else:
            print(f"{'':<7} {'':<24} in {server.place.label}")


@app.command(help="Run each stdio MCP server under `stockade run --mcp NAME` (its own policy: the project read-only, no home, no network).")
def wrap(agents: AgentsArgument = None) -> None:
    from stockade.cli.hook import HookError, stockade_executable

    try:
        stockade = stockade_executable()
    except HookError as error:
        raise UsageError(str(error)) from None
    home, project = _where()
    report(mcp_config.rewrite(home, project, _agents(agents), stockade))


@app.command(help="Give each wrapped MCP server its own command back (run unsandboxed again).")
def unwrap(agents: AgentsArgument = None) -> None:
    home, project = _where()
    report(mcp_config.rewrite(home, project, _agents(agents), None))


def report(done: list[tuple[mcp_config.Server, str]]) -> None:
    for line in mcp_config.report_lines(done) or ["stockade: no MCP servers in the agents' configs for this project"]:
        print(line)
