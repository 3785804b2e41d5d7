"""Credential stores of common tools stay unreadable without anyone listing them.

A home planted with a canary in each store below: none is readable under the
built-in `default` and `agent` profiles, while `~/.gitconfig` and the project
are. The control runs the same reads with `home = "host"` (the real home,
read-only), where every store not on the deny list is readable: what keeps them
unreadable is the private home, not the list (which is a second wall, and what
macOS has).
"""

from __future__ import annotations

import pytest

from tests.e2e.boxes import Box

STORES = (
    # cloud CLIs
    ".aws/credentials",
    ".aws/config",
    ".aws/sso/cache/token.json",
    ".config/gcloud/credentials.db",
    ".config/gcloud/application_default_credentials.json",
    ".azure/msal_token_cache.json",
    ".oci/config",
    ".config/doctl/config.yaml",
    ".config/hcloud/cli.toml",
    ".aliyun/config.json",
    ".ibmcloud/config.json",
    ".kube/config",
    ".docker/config.json",
    ".terraform.d/credentials.tfrc.json",
    ".config/pulumi/credentials.json",
    ".fly/config.yml",
    ".vercel/auth.json",
    ".netlify/config.json",
    ".config/heroku/config.json",
    ".netrc",
    # package registries and language tools
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".config/pip/pip.conf",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".nuget/NuGet/NuGet.Config",
    ".composer/auth.json",
    ".config/composer/auth.json",
    ".cabal/config",
    ".local/share/uv/credentials/credentials.toml",
    ".config/hub",
    ".config/gh/hosts.yml",
    ".git-credentials",
    ".config/git/credentials",
    ".config/glab-cli/config.yml",
    # databases
    ".pgpass",
    ".my.cnf",
    ".mongoshrc.js",
    ".dbshell",
    ".rediscli_history",
    ".psql_history",
    # sync, secrets, password managers, wallets
    ".config/rclone/rclone.conf",
    ".s3cfg",
    ".boto",
    ".password-store/email.gpg",
    ".config/op/config",
    ".config/Bitwarden CLI/data.json",
    ".vault-token",
    ".local/share/keyrings/login.keyring",
    ".bitcoin/wallet.dat",
    ".ethereum/keystore/key",
    ".electrum/wallets/default_wallet",
    ".gnupg/private-keys-v1.d/key",
    ".ssh/id_ed25519",
    ".ssh/config",
    # shell and REPL histories
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".lesshst",
    ".local/share/fish/fish_history",
    # browsers
    ".mozilla/firefox/default/logins.json",
    ".config/google-chrome/Default/Login Data",
    ".config/chromium/Default/Cookies",
    ".config/BraveSoftware/Brave-Browser/Default/Login Data",
    # coding agents and editors
    ".claude/.credentials.json",
    ".claude.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".config/github-copilot/apps.json",
    ".cursor/mcp.json",
    ".continue/config.json",
    ".aider.conf.yml",
    ".config/Code/User/globalStorage/state.vscdb",
    ".wakatime.cfg",
    # other projects' secrets
    "work/other-app/.env",
    "work/other-app/.env.production",
    "src/legacy/config/secrets.yml",
)


def _plant(box: Box) -> None:
    for index, name in enumerate(STORES):
        path = box.home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"CANARY-{index}\n")
    (box.home / ".gitconfig").write_text("[user]\n\tname = Visible Identity\n")


def _reads(box: Box, policy: str | None, profile: str | None) -> str:
    script = "".join(f"cat ~/{_q(name)} 2>/dev/null; " for name in STORES) + "git config --global user.name; cat ./readme"
    options = ["--profile", profile] if profile else []
    result = box.run(script, policy=policy, options=options)
    assert result.returncode == 0, result
    return result.stdout


def _q(name: str) -> str:
    return "'" + name.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("profile", ["default", "agent"])
def test_no_credential_store_is_readable_and_identity_and_project_are(vbox: Box, profile: str) -> None:
    assert len(STORES) >= 50
    _plant(vbox)
    (vbox.project / "readme").write_text("PROJECT-README\n")
    seen = _reads(vbox, None, profile)
    leaked = [STORES[int(line.split("-")[1])] for line in seen.splitlines() if line.startswith("CANARY-")]
    assert not leaked, leaked
    assert "Visible Identity" in seen and "PROJECT-README" in seen, seen


def test_control_the_real_home_shows_what_no_list_names(vbox: Box) -> None:
    _plant(vbox)
    (vbox.project / "readme").write_text("PROJECT-README\n")
    seen = _reads(vbox, 'extends = ["agent"]\n[filesystem]\nhome = "host"\n', None)
    readable = {STORES[int(line.split("-")[1])] for line in seen.splitlines() if line.startswith("CANARY-")}
    assert {"work/other-app/.env", ".wakatime.cfg", ".dbshell", ".cursor/mcp.json"} <= readable, readable  # no list names them
