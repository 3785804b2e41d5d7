"""Files and folders a program on the host may run code from later, without being asked: one table.

A sandboxed run can write its project; what it writes there must not run on the
host afterwards unnoticed. Each entry has one class:

- PROTECTED: read-only inside every writable place, existing or not; one the run
  makes in a new place (a repository it cloned) is moved aside after the run.
  Editors' and agents' settings and MCP files, VCS config and hooks, files the
  shell's environment tools load.
- REPORTED: ordinary work that still runs code later (build files, test hooks,
  agent instructions); it stays writable and the run's summary names each one
  created or changed.

Git directories are found by what they hold (HEAD, objects, refs), whatever
their name: the check after the run (bwrap/gitcheck.py) judges their config and
hooks wherever they are. `where` is "project" (relative to every writable place)
or "home" (relative to $HOME, protected when a writable place covers it).
The source column says which tool runs it, and where that is documented.
"""

from __future__ import annotations

from typing import NamedTuple

PROTECTED = "protected"
REPORTED = "reported"


class Entry(NamedTuple):
    path: str  # relative; a REPORTED bare name matches at any depth
    where: str  # "project" or "home"
    cls: str  # PROTECTED or REPORTED
    folder: bool  # a folder when it exists: what is inside is watched too
    source: str


P, H = "project", "home"

TABLE: tuple[Entry, ...] = (
    # -- version control ------------------------------------------------------------------------
    Entry(".git/hooks", P, PROTECTED, True, "git: githooks(5), run by commit, checkout, merge, push"),
    Entry(".git/config", P, PROTECTED, False, "git: core.fsmonitor, core.hooksPath, aliases, filters run programs (git-config(1))"),
    Entry(".git/commondir", P, PROTECTED, False, "git: gitrepository-layout(5), names where config and hooks are read"),
    Entry(".git/config.worktree", P, PROTECTED, False, "git: extensions.worktreeConfig (git-worktree(1))"),
    Entry(".gitattributes", P, REPORTED, False, "git: filter and diff drivers named here run programs set in config (gitattributes(5))"),
    Entry(".hg/hgrc", P, PROTECTED, False, "Mercurial: [hooks] and [extensions] run on hg commands (hgrc(5))"),
    Entry(".github/hooks", P, PROTECTED, True, "GitHub Copilot coding agent hooks"),
    Entry(".husky", P, REPORTED, True, "husky: git hooks kept in the repository (typicode.github.io/husky)"),
    Entry("lefthook.yml", P, REPORTED, False, "lefthook: git hooks (github.com/evilmartians/lefthook)"),
    Entry(".lefthook.yml", P, REPORTED, False, "lefthook: git hooks"),
    Entry(".pre-commit-config.yaml", P, REPORTED, False, "pre-commit: hooks run by git commit (pre-commit.com)"),
    # -- shells and environment loaders ---------------------------------------------------------
    Entry(".envrc", P, PROTECTED, False, "direnv: sourced on cd once allowed (direnv.net); the allow is by content"),
    Entry(".stockade.toml", P, PROTECTED, False, "stockade: the project's policy"),
    Entry(".mise.toml", P, PROTECTED, False, "mise: [hooks] and [env] _.source run on cd (mise.jdx.dev/hooks)"),
    Entry("mise.toml", P, PROTECTED, False, "mise: the same file under its other name"),
    # -- editors --------------------------------------------------------------------------------
    Entry(".vscode", P, PROTECTED, True, "VS Code: tasks.json runOn folderOpen, settings naming executables"),
    Entry(".idea", P, PROTECTED, True, "JetBrains IDEs: run configurations and startup tasks"),
    Entry(".zed", P, PROTECTED, True, "Zed: settings.json language servers and tasks (zed.dev/docs/configuring-zed)"),
    Entry(".helix", P, PROTECTED, True, "Helix: languages.toml language-server commands (docs.helix-editor.com)"),
    Entry(".nvim.lua", P, PROTECTED, False, "Neovim: exrc, run when trusted (:help exrc)"),
    Entry(".exrc", P, PROTECTED, False, "Vim/Neovim: exrc"),
    Entry(".devcontainer", P, PROTECTED, True, "Dev Containers: initializeCommand runs on the host by design (containers.dev)"),
    Entry(".devcontainer.json", P, PROTECTED, False, "Dev Containers: the same, at the top"),
    # -- coding agents: settings, MCP servers, hooks --------------------------------------------
    Entry(".claude", P, PROTECTED, True, "Claude Code: settings.json hooks and MCP servers"),
    Entry(".mcp.json", P, PROTECTED, False, "Claude Code: project MCP servers"),
    Entry(".cursor", P, PROTECTED, True, "Cursor: hooks.json, mcp.json"),
    Entry(".codex", P, PROTECTED, True, "Codex CLI: project config.toml and hooks.json"),
    Entry(".gemini", P, PROTECTED, True, "Gemini CLI: settings.json hooks and MCP servers"),
    Entry(".windsurf", P, PROTECTED, True, "Windsurf: workflows and MCP settings"),
    Entry(".roo", P, PROTECTED, True, "Roo Code: mcp.json"),
    Entry(".kiro", P, PROTECTED, True, "Kiro: settings/mcp.json and hooks"),
    Entry(".continue", P, PROTECTED, True, "Continue: config with MCP servers"),
    Entry(".amazonq", P, PROTECTED, True, "Amazon Q Developer: mcp.json"),
    Entry(".opencode", P, PROTECTED, True, "opencode: project agents and plugins"),
    Entry("opencode.json", P, PROTECTED, False, "opencode: MCP servers and commands (opencode.ai/docs/config)"),
    Entry("opencode.jsonc", P, PROTECTED, False, "opencode: the same, with comments"),
    Entry(".aider.conf.yml", P, PROTECTED, False, "aider: lint-cmd and test-cmd run after edits (aider.chat/docs/config)"),
    Entry("CLAUDE.md", P, REPORTED, False, "Claude Code: instructions the agent follows on the host"),
    Entry("AGENTS.md", P, REPORTED, False, "Codex and others: agent instructions"),
    Entry("GEMINI.md", P, REPORTED, False, "Gemini CLI: agent instructions"),
    Entry(".cursorrules", P, REPORTED, False, "Cursor: agent instructions"),
    Entry(".windsurfrules", P, REPORTED, False, "Windsurf: agent instructions"),
    Entry(".clinerules", P, REPORTED, False, "Cline: agent instructions"),
    Entry(".github/copilot-instructions.md", P, REPORTED, False, "GitHub Copilot: agent instructions"),
    # -- package managers -----------------------------------------------------------------------
    Entry(".npmrc", P, PROTECTED, False, "npm: script-shell, node-options, registries with tokens"),
    Entry(".yarnrc", P, PROTECTED, False, "Yarn 1: yarn-path runs the named file"),
    Entry(".yarnrc.yml", P, PROTECTED, False, "Yarn 2+: yarnPath and plugins run"),
    Entry(".cargo/config", P, PROTECTED, False, "Cargo: runner, rustc-wrapper, linker (doc.rust-lang.org/cargo/reference/config.html)"),
    Entry(".cargo/config.toml", P, PROTECTED, False, "Cargo: the same"),
    Entry(".pip/pip.conf", P, PROTECTED, False, "pip: index and trusted hosts"),
    Entry("pip.conf", P, PROTECTED, False, "pip: PIP_CONFIG_FILE in a virtualenv"),
    Entry("package.json", P, REPORTED, False, "npm, yarn, pnpm: scripts run by install and run"),
    Entry("*.pth", P, REPORTED, False, "Python: import lines run at every start of that interpreter (site)"),
    Entry("setup.py", P, REPORTED, False, "setuptools: runs on build and install"),
    Entry("conftest.py", P, REPORTED, False, "pytest: loaded by every test run"),
    Entry("noxfile.py", P, REPORTED, False, "nox"),
    Entry("tox.ini", P, REPORTED, False, "tox: commands"),
    # -- task runners and CI --------------------------------------------------------------------
    Entry("Makefile", P, REPORTED, False, "make"),
    Entry("makefile", P, REPORTED, False, "make"),
    Entry("GNUmakefile", P, REPORTED, False, "GNU make"),
    Entry("*.mk", P, REPORTED, False, "make: included files"),
    Entry("Justfile", P, REPORTED, False, "just"),
    Entry("justfile", P, REPORTED, False, "just"),
    Entry("Taskfile.yml", P, REPORTED, False, "Task"),
    Entry("Rakefile", P, REPORTED, False, "rake"),
    Entry("*.sh", P, REPORTED, False, "shell scripts"),
    Entry(".github/workflows", P, REPORTED, True, "GitHub Actions: runs on push"),
    Entry(".gitlab-ci.yml", P, REPORTED, False, "GitLab CI: runs on push"),
    # -- debuggers and REPLs: their init files in the working directory run at start -------------
    Entry(".pdbrc", P, PROTECTED, False, "Python pdb (breakpoint(), pytest --pdb): ./.pdbrc run as if typed (docs.python.org/3/library/pdb.html)"),
    Entry(".gdbinit", P, PROTECTED, False, "gdb: ./.gdbinit at start where auto-load safe-path allows (gdb manual, Init File in the Current Dir)"),
    Entry(".lldbinit", P, PROTECTED, False, "lldb: ./.lldbinit with target.load-cwd-lldbinit or --local-lldbinit (lldb(1) CONFIGURATION FILES)"),
    Entry(".irbrc", P, PROTECTED, False, "Ruby irb (rails console): ./.irbrc, irb.rc, _irbrc are Ruby code (ruby/irb lib/irb.rb)"),
    Entry("irb.rc", P, PROTECTED, False, "Ruby irb: the same"),
    Entry("_irbrc", P, PROTECTED, False, "Ruby irb: the same"),
    Entry(".pryrc", P, PROTECTED, False, "pry (binding.pry): ./.pryrc is Ruby code, after ~/.pryrc (github.com/pry/pry/wiki/Pry-rc)"),
    Entry(".Rprofile", P, PROTECTED, False, "R and Rscript: ./.Rprofile is R code sourced at start (R Startup manual page)"),
    Entry(".Renviron", P, PROTECTED, False, "R: ./.Renviron sets R_PROFILE_USER and R_LIBS at start (R Startup manual page)"),
    Entry(".ghci", P, PROTECTED, False, "GHCi (cabal repl, stack ghci): ./.ghci commands, :! runs a shell (GHC user guide, The .ghci files)"),
    Entry(".nvimrc", P, PROTECTED, False, "Neovim exrc: the third name beside .nvim.lua and .exrc (:help exrc)"),
    Entry(".dir-locals.el", P, PROTECTED, False, "Emacs: eval: runs Lisp on opening a file once marked safe (Emacs manual, Safe File Variables)"),
    Entry(".dir-locals-2.el", P, PROTECTED, False, "Emacs: the same"),
    # -- environment loaders' other files ------------------------------------------------------
    Entry("mise.local.toml", P, PROTECTED, False, "mise: the same powers as mise.toml (mise.jdx.dev/hooks.html)"),
    Entry(".mise.local.toml", P, PROTECTED, False, "mise: the same"),
    Entry(".mise/config.toml", P, PROTECTED, False, "mise: the same"),
    Entry(".config/mise.toml", P, PROTECTED, False, "mise: the same"),
    Entry(".config/mise/config.toml", P, PROTECTED, False, "mise: the same"),
    Entry(".miserc.toml", P, PROTECTED, False, "mise: sets MISE_ENV, which picks more mise.<env>.toml files"),
    Entry("flake.nix", P, REPORTED, False, "nix-direnv: watched by an allowed .envrc, shellHook runs on cd with no new allow (nix-direnv)"),
    Entry("flake.lock", P, REPORTED, False, "nix-direnv: the same"),
    Entry("shell.nix", P, REPORTED, False, "direnv use nix: the same"),
    Entry("devenv.nix", P, REPORTED, False, "devenv: enterShell runs on cd through direnv"),
    # -- package managers and build tools that run a file of the project on every command --------
    Entry(".pnpmfile.cjs", P, REPORTED, False, "pnpm: readPackage and afterAllResolved hooks run on install (pnpm.io/pnpmfile)"),
    Entry(".yarn/releases", P, REPORTED, True, "Yarn 2+: the yarnPath file runs as yarn itself (boostsecurityio.github.io/lotp/tool/yarn)"),
    Entry(".yarn/plugins", P, REPORTED, True, "Yarn 2+: plugins load on every command"),
    Entry("bunfig.toml", P, REPORTED, False, "bun: preload scripts run before every bun run and bun test (bun.sh/docs/runtime/bunfig)"),
    Entry("rust-toolchain.toml", P, REPORTED, False, "rustup: [toolchain] path runs that folder's cargo and rustc here (rustup book, Overrides)"),
    Entry("rust-toolchain", P, REPORTED, False, "rustup: the same"),
    Entry(".mvn", P, REPORTED, True, "Maven: jvm.config (-javaagent), maven.config, extensions.xml jars (maven.apache.org/configure.html)"),
    # -- the home (protected when a writable place covers it) ------------------------------------
    *(
        Entry(name, H, PROTECTED, False, "shells: read at every start")
        for name in (
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".profile",
            ".zshrc",
            ".zshenv",
            ".zprofile",
            ".zlogin",
            ".zlogout",
            ".inputrc",
            ".pam_environment",
            ".xprofile",
            ".xsession",
        )
    ),
    Entry(".config/fish", H, PROTECTED, True, "fish: config.fish and conf.d"),
    Entry(".pdbrc", H, PROTECTED, False, "Python pdb: ~/.pdbrc runs at every debugger start"),
    Entry(".gdbinit", H, PROTECTED, False, "gdb: the home init file runs at every start, safe-path or not (gdb manual, Auto-loading)"),
    Entry(".gdbearlyinit", H, PROTECTED, False, "gdb: the early init file"),
    Entry(".config/gdb", H, PROTECTED, True, "gdb: gdbinit and gdbearlyinit under XDG"),
    Entry(".lldbinit", H, PROTECTED, False, "lldb: read at every start (lldb(1))"),
    Entry(".irbrc", H, PROTECTED, False, "irb: Ruby code at every start"),
    Entry(".config/irb", H, PROTECTED, True, "irb: irbrc under XDG"),
    Entry(".pryrc", H, PROTECTED, False, "pry: Ruby code at every start"),
    Entry(".config/pry", H, PROTECTED, True, "pry: pryrc under XDG"),
    Entry(".Rprofile", H, PROTECTED, False, "R: sourced at every start"),
    Entry(".Renviron", H, PROTECTED, False, "R: the environment of every start"),
    Entry(".ghci", H, PROTECTED, False, "GHCi: commands at every start"),
    Entry(".ghc", H, PROTECTED, True, "GHCi: ghci.conf"),
    Entry(".ipython", H, PROTECTED, True, "IPython and Jupyter kernels: profile_*/startup/*.py and ipython_config.py run at every start"),
    Entry(".jupyter", H, PROTECTED, True, "Jupyter: jupyter_*_config.py is executed"),
    Entry(".config/direnv", H, PROTECTED, True, "direnv: direnvrc and lib/*.sh are sourced before every .envrc"),
    Entry(".local/share/direnv", H, PROTECTED, True, "direnv: the allow store approves an .envrc"),
    Entry(".config/mise", H, PROTECTED, True, "mise: the global config's hooks and env apply everywhere"),
    Entry(".config/starship.toml", H, PROTECTED, False, "starship: custom commands run on every prompt (starship.rs, Custom commands)"),
    Entry(".config/husky", H, PROTECTED, True, "husky: init.sh is sourced before every hook (typicode.github.io/husky/how-to.html)"),
    Entry(".bunfig.toml", H, PROTECTED, False, "bun: global preload (bun.sh/docs/runtime/bunfig)"),
    Entry(".gradle/init.gradle", H, PROTECTED, False, "Gradle: init scripts run before every build (docs.gradle.org/userguide/init_scripts.html)"),
    Entry(".gradle/init.gradle.kts", H, PROTECTED, False, "Gradle: the same"),
    Entry(".gradle/init.d", H, PROTECTED, True, "Gradle: the same, a folder of them"),
    Entry(".config/autostart", H, PROTECTED, True, "XDG autostart: run at login"),
    Entry(".config/systemd", H, PROTECTED, True, "systemd --user units"),
    Entry(".config/environment.d", H, PROTECTED, True, "systemd: the session's environment"),
    Entry(".config/git", H, PROTECTED, True, "git: the user's config and hooks"),
    Entry(".config/pip", H, PROTECTED, True, "pip: the user's config"),
    Entry(".config/Code/User", H, PROTECTED, True, "VS Code: user settings and tasks"),
    Entry(".gitconfig", H, PROTECTED, False, "git: the user's config"),
    Entry(".ssh", H, PROTECTED, True, "ssh: authorized_keys, config ProxyCommand"),
    Entry(".gnupg", H, PROTECTED, True, "GnuPG: gpg.conf and agent configuration"),
    Entry(".local/bin", H, PROTECTED, True, "programs on the user's PATH"),
    Entry(".bun/bin", H, PROTECTED, True, "programs on the user's PATH"),
    Entry(".cargo/bin", H, PROTECTED, True, "programs on the user's PATH"),
    Entry(".cargo/config.toml", H, PROTECTED, False, "Cargo: the user's config"),
    Entry(".npmrc", H, PROTECTED, False, "npm: the user's config"),
    Entry(".claude", H, PROTECTED, True, "Claude Code: the user's settings, hooks, commands"),
    Entry(".claude.json", H, PROTECTED, False, "Claude Code: the user's MCP servers"),
    Entry("Library/LaunchAgents", H, PROTECTED, True, "macOS launchd: run at login"),
    # -- tools that run a program their home config names, on a common command ------------------
    Entry(".kube/config", H, PROTECTED, False, "kubectl, helm: users[].user.exec.command runs on every API call (client-go credential plugins)"),
    Entry(".aws/config", H, PROTECTED, False, "AWS CLI and SDKs: credential_process runs as credentials resolve (AWS CLI guide, external process)"),
    Entry(".docker/config.json", H, PROTECTED, False, "docker: credsStore, credHelpers run docker-credential-NAME (credential-helpers README)"),
    Entry(".config/go/env", H, PROTECTED, False, "go: go env -w settings (GOFLAGS=-toolexec, CC, GOTOOLCHAIN) for every build (cmd/go env_write)"),
    Entry(".psqlrc", H, PROTECTED, False, "psql: meta-commands at every start, \\! runs a shell (psql(1), Files)"),
)


def paths(where: str, cls: str) -> tuple[str, ...]:
    return tuple(entry.path for entry in TABLE if entry.where == where and entry.cls == cls)


def folders() -> frozenset[str]:
    return frozenset(entry.path for entry in TABLE if entry.folder)
