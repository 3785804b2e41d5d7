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
their name: the check after the run (bwrap/after/gitcheck.py) judges their config and
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
    Entry("mvnw", P, REPORTED, False, "Maven Wrapper: the script fetches and runs the jar its properties name (maven.apache.org, Maven Wrapper)"),
    Entry("gradlew", P, REPORTED, False, "Gradle Wrapper: downloads and runs the distributionUrl's Gradle (docs.gradle.org, Wrapper DSL)"),
    Entry("gradle/wrapper", P, REPORTED, True, "Gradle Wrapper: the properties' distributionUrl and the jar (docs.gradle.org, Wrapper DSL)"),
    Entry("settings.gradle", P, REPORTED, False, "Gradle: the settings script runs on every build and IDE sync (docs.gradle.org, Build Lifecycle)"),
    Entry("settings.gradle.kts", P, REPORTED, False, "Gradle: the same, in Kotlin"),
    Entry("build.gradle", P, REPORTED, False, "Gradle: every project's build script runs at configuration (docs.gradle.org, Build Lifecycle)"),
    Entry("build.gradle.kts", P, REPORTED, False, "Gradle: the same, in Kotlin"),
    Entry("buildSrc", P, REPORTED, True, "Gradle: compiled and put on every build script's classpath (Gradle user guide, Organizing Build Logic)"),
    Entry("gradle.properties", P, REPORTED, False, "Gradle: org.gradle.jvmargs are the daemon's JVM flags (-javaagent) (Gradle, Build Environment)"),
    Entry(".jvmopts", P, REPORTED, False, "sbt launcher: appended to JAVA_OPTS (-javaagent) on every sbt command (sbt-launcher-package help)"),
    Entry(".sbtopts", P, REPORTED, False, "sbt launcher: appended to SBT_OPTS on every sbt command (sbt-launcher-package help)"),
    Entry("Gemfile", P, REPORTED, False, "Bundler: Ruby evaluated by every bundle command (boostsecurityio.github.io/lotp/tool/bundler)"),
    Entry(".bundle/config", P, REPORTED, False, "Bundler: BUNDLE_GEMFILE points bundle at another Gemfile (bundler.io, bundle config)"),
    Entry(".rubocop.yml", P, REPORTED, False, "RuboCop: require: and plugins: files go to Kernel.require (docs.rubocop.org, Extensions)"),
    Entry(".rspec", P, REPORTED, False, "RSpec: its options (--require FILE) apply to every rspec run (rspec-core, read options from files)"),
    Entry(".mocharc.*", P, REPORTED, False, "Mocha: require: modules load before tests; .mocharc.js is itself required (mochajs.org, Configuring)"),
    Entry("sitecustomize.py", P, REPORTED, False, "Python: imported at every start of the interpreter whose site-packages hold it (site)"),
    Entry("usercustomize.py", P, REPORTED, False, "Python: the same, from a user site-packages (site)"),
    Entry(".pnp.cjs", P, REPORTED, False, "Yarn PnP: injected into every node process yarn runs (yarnpkg.com/cli/node)"),
    Entry(".pnp.loader.mjs", P, REPORTED, False, "Yarn PnP: the same, as an ESM loader"),
    Entry(".env", P, REPORTED, False, "autoenv: executed as shell on cd (github.com/hyperupcall/autoenv); pipenv and bun load its variables"),
    Entry(".env.leave", P, REPORTED, False, "autoenv: executed on leaving the folder with AUTOENV_ENABLE_LEAVE (github.com/hyperupcall/autoenv)"),
    Entry(".autoenv.zsh", P, PROTECTED, False, "zsh-autoenv: sourced on cd once authorised (github.com/Tarrasch/zsh-autoenv)"),
    Entry(".autoenv_leave.zsh", P, PROTECTED, False, "zsh-autoenv: sourced on leaving the folder"),
    Entry("default.nix", P, REPORTED, False, "direnv use nix, nix-shell: its shellHook runs on cd behind an allowed .envrc (direnv wiki)"),
    Entry("devenv.yaml", P, REPORTED, False, "devenv: imports devenv.nix modules whose enterShell runs (devenv.sh/reference/yaml-options)"),
    Entry("devbox.json", P, REPORTED, False, "Devbox: shell.init_hook runs on devbox shell and devbox run (jetify-com/devbox#93)"),
    Entry(".lazy.lua", P, PROTECTED, False, "lazy.nvim: local_spec loads the folder's .lazy.lua at start (lazy.nvim lua/lazy/core/config.lua)"),
    Entry("*.code-workspace", P, REPORTED, False, "VS Code: a workspace's settings and tasks (runOn folderOpen), once trusted (Workspace Trust)"),
    Entry(".jj/repo/config.toml", P, PROTECTED, False, "Jujutsu: ui.pager, fix.tools and aliases run programs (jj docs/config.md, repo settings)"),
    Entry(".qwen", P, PROTECTED, True, "Qwen Code: settings.json mcpServers start with a session (qwenlm.github.io/qwen-code-docs, MCP)"),
    Entry(".crush.json", P, PROTECTED, False, "Crush: MCP commands start and $(command) in values runs (charmbracelet/crush docs, MCP)"),
    Entry("crush.json", P, PROTECTED, False, "Crush: the same"),
    Entry("QWEN.md", P, REPORTED, False, "Qwen Code: instructions loaded into every session (qwen-code-docs, memory)"),
    Entry(".goosehints", P, REPORTED, False, "goose: instructions loaded in that folder (block.github.io/goose, using goosehints)"),
    Entry(".github/instructions", P, REPORTED, True, "GitHub Copilot: *.instructions.md added to requests (docs.github.com, custom instructions)"),
    Entry(".github/prompts", P, REPORTED, True, "GitHub Copilot: prompt files"),
    Entry(".github/agents", P, REPORTED, True, "GitHub Copilot: agent definitions"),
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
    Entry(".sqliterc", H, PROTECTED, False, "sqlite3: read and executed at start, .shell runs a program (Using SQLite, appendix B)"),
    Entry(".my.cnf", H, PROTECTED, False, "mysql, mariadb: [client] pager= runs a program for every result (dev.mysql.com, option files)"),
    Entry(".mavenrc", H, PROTECTED, False, "mvn: sourced as shell by every mvn (maven.apache.org/ref, apache-maven)"),
    Entry(".yarnrc", H, PROTECTED, False, "Yarn 1: yarn-path defers every yarn to another file (yarnpkg.com/en/docs/yarnrc)"),
    Entry(".local/lib", H, PROTECTED, True, "Python: the user site's .pth import lines and usercustomize run at every start (site)"),
    Entry(".hgrc", H, PROTECTED, False, "Mercurial: [hooks] run programs on commit, update, pull (mercurial wiki, Hook)"),
    Entry(".config/hg", H, PROTECTED, True, "Mercurial: hgrc under XDG"),
    Entry(".config/jj", H, PROTECTED, True, "Jujutsu: ui.pager, diff and merge tools, fix.tools (jj config docs)"),
    Entry(".vimrc", H, PROTECTED, False, "Vim: Ex commands at every start, :! runs a program (:help startup)"),
    Entry(".vim", H, PROTECTED, True, "Vim: plugin/**/*.vim sourced at every start (:help load-plugins)"),
    Entry(".config/nvim", H, PROTECTED, True, "Neovim: init.lua and plugin/ at every start (:help init.lua)"),
    Entry(".local/share/nvim", H, PROTECTED, True, "Neovim: site/pack/*/start plugins load at every start (neovim.io/doc/user/pack.html)"),
    Entry(".emacs", H, PROTECTED, False, "Emacs: the init file is Lisp loaded at every start (Emacs manual, Init File)"),
    Entry(".emacs.el", H, PROTECTED, False, "Emacs: the same"),
    Entry(".emacs.d", H, PROTECTED, True, "Emacs: init.el, early-init.el and packages"),
    Entry(".config/emacs", H, PROTECTED, True, "Emacs: the same under XDG"),
    Entry(".vscode/extensions", H, PROTECTED, True, "VS Code: installed extensions run in the extension host"),
    Entry(".vscode-server", H, PROTECTED, True, "VS Code Remote: the server and its extensions run on connect (vscode-remote-release#6376)"),
    Entry(".tmux.conf", H, PROTECTED, False, "tmux: commands at server start, run-shell runs a program (tmux(1))"),
    Entry(".config/tmux", H, PROTECTED, True, "tmux: tmux.conf under XDG (tmux(1))"),
    Entry(".wezterm.lua", H, PROTECTED, False, "WezTerm: Lua evaluated at start, run_child_process (wezterm.org/config/files.html)"),
    Entry(".config/wezterm", H, PROTECTED, True, "WezTerm: the same under XDG"),
    Entry(".config/kitty", H, PROTECTED, True, "kitty: shell, startup_session and watchers run programs (sw.kovidgoyal.net/kitty/conf)"),
    Entry(".config/ghostty", H, PROTECTED, True, "Ghostty: command and initial-command run in each surface (ghostty.org/docs/config)"),
    Entry(".config/alacritty", H, PROTECTED, True, "Alacritty: [terminal] shell runs in each window (alacritty(5))"),
    Entry(".docker/cli-plugins", H, PROTECTED, True, "docker: docker-NAME here runs before the system's plugins (docker/cli cli-plugins/manager)"),
    Entry(".codex", H, PROTECTED, True, "Codex CLI: config.toml notify, mcp_servers and hooks run programs (openai/codex docs/config.md)"),
    Entry(".gemini", H, PROTECTED, True, "Gemini CLI: settings.json hooks and mcpServers (geminicli.com/docs/hooks)"),
    Entry(".cursor", H, PROTECTED, True, "Cursor: mcp.json servers and hooks.json commands (cursor.com/docs/mcp)"),
    Entry(".config/opencode", H, PROTECTED, True, "opencode: plugins/*.ts and *.js load at start (opencode.ai/docs/plugins)"),
    Entry(".copilot", H, PROTECTED, True, "GitHub Copilot CLI: mcp-config.json servers (github/docs, Copilot CLI)"),
    Entry(".continue", H, PROTECTED, True, "Continue: config.ts is executed as the config loads (continue.dev/docs)"),
    Entry(".codeium/windsurf", H, PROTECTED, True, "Windsurf: mcp_config.json servers"),
    Entry(".aws/amazonq", H, PROTECTED, True, "Amazon Q Developer: agents' MCP servers run as local processes (docs.aws.amazon.com, qdev-mcp)"),
    Entry(".aider.conf.yml", H, PROTECTED, False, "aider: lint-cmd and test-cmd run after every edit (aider.chat/docs/config.html)"),
    Entry(".qwen", H, PROTECTED, True, "Qwen Code: settings.json mcpServers in every project (qwen-code-docs, MCP)"),
    Entry(".config/crush", H, PROTECTED, True, "Crush: crushrc is Bash run at every start (charmbracelet/crush docs/config)"),
    Entry(".config/goose", H, PROTECTED, True, "goose: config.yaml extensions are commands started with a session (block.github.io/goose)"),
)


def paths(where: str, cls: str) -> tuple[str, ...]:
    return tuple(entry.path for entry in TABLE if entry.where == where and entry.cls == cls)


def folders() -> frozenset[str]:
    return frozenset(entry.path for entry in TABLE if entry.folder)
