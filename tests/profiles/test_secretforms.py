"""Each reader finds the secrets of its format, names their hosts, and shows nothing it does not understand.

Half of these are a hostile review's reproducers: files as tools really read
them (indented .pypirc, flow-style YAML, a token as a URL's user name, CR line
ends, commented-out tokens) where a line reader had shown the secret.
"""

from __future__ import annotations

import base64
import random
import string

import pytest

from stockade.profiles import secretforms as forms


def shown(rewrite: forms.Rewrite, placeholder: str = "PH") -> str:
    text = rewrite.text
    for index, found in enumerate(rewrite.found):
        text = text.replace(forms.MARK.format(index), found.spell(placeholder))
    return text


def pairs(rewrite: forms.Rewrite) -> list[tuple[str, tuple[str, ...]]]:
    return [(found.value, found.hosts) for found in rewrite.found]


# -- npm ---------------------------------------------------------------------------------------


def test_npmrc_tokens_basic_pairs_and_passwords_go_to_their_registry() -> None:
    text = (
        "registry=https://npm.corp.test/\n//npm.corp.test/:_authToken=npm_SECRET\n"
        f"_auth={base64.b64encode(b'bob:pw1').decode()}\n//x.test:8443/:_password={base64.b64encode(b'pw2').decode()}\n"
        "//x.test:8443/:username=bob\nproxy=http://corp:3128\nfund=false\n//e.test/:_authToken=${NPM_TOKEN}\ncafile=/etc/corp.pem\n"
    )
    rewrite = forms.npmrc(text, "~/.npmrc")
    assert pairs(rewrite) == [("npm_SECRET", ("npm.corp.test:443",)), ("pw1", ("npm.corp.test:443",)), ("pw2", ("x.test:8443",))]
    out = shown(rewrite)
    assert "//npm.corp.test/:_authToken=PH" in out and f"_auth={base64.b64encode(b'bob:PH').decode()}" in out
    assert f"//x.test:8443/:_password={base64.b64encode(b'PH').decode()}" in out
    assert "fund=false" in out and "username=bob" in out and "${NPM_TOKEN}" in out and "proxy" not in out and "cafile" not in out


def test_npmrc_values_are_read_as_npm_reads_them() -> None:
    """A ; starts a comment in an unquoted value; a quoted one is JSON; CR ends a line (npm's ini)."""
    rewrite = forms.npmrc(
        '//a.test/:_authToken=tok-one ;old\r//b.test/:_authToken="tok\\u002dtwo"\r\n# //c.test/:_authToken=npm_OLDTOKEN123456789\n', "~/.npmrc"
    )
    assert pairs(rewrite) == [("tok-one", ("a.test:443",)), ("tok-two", ("b.test:443",))]
    assert "OLDTOKEN" not in shown(rewrite) and "old" not in shown(rewrite)


def test_npmrc_sections_lone_words_and_unknown_secrets_are_withheld() -> None:
    rewrite = forms.npmrc("color=false\n//r.test/:otp-secret=abc\nLONEWORD\n[sect]\nregistry=https://evil.test/\n_authToken=x\n", "~/.npmrc")
    assert shown(rewrite) == "color=false\n" and len(rewrite.withheld) == 5 and rewrite.found == []


# -- ini -----------------------------------------------------------------------------------------


def test_pip_conf_user_and_password_in_every_index_url() -> None:
    text = "[global]\nindex-url = https://al:p%40ss@pypi.corp.test/simple\nextra-index-url =\n    https://pypi.org/simple\n    https://tok:abc@other.test:8443/s\nproxy = http://u:p@proxy:8080\ntimeout = 60\n"
    rewrite = forms.ini(text, "~/.config/pip/pip.conf")
    assert pairs(rewrite) == [
        ("al", ("pypi.corp.test:443",)),
        ("p@ss", ("pypi.corp.test:443",)),
        ("tok", ("other.test:8443",)),
        ("abc", ("other.test:8443",)),
    ]
    out = shown(rewrite)
    assert "https://PH:PH@pypi.corp.test/simple" in out and "https://pypi.org/simple" in out and "timeout = 60" in out and "proxy" not in out


def test_an_indented_pypirc_as_pypi_documents_it() -> None:
    text = "[distutils]\n  index-servers =\n    pypi\n    corp\n\n[pypi]\n  username = __token__\n  password = pypi-AgENdGVzdC5weXBpLm9yZwIkSECRET\n[corp]\n  repository: https://up.corp.test/\n  password: c0rp-pw\n[orphan]\n  password = xyzzy\n"
    rewrite = forms.ini(text, "~/.pypirc")
    assert pairs(rewrite) == [("pypi-AgENdGVzdC5weXBpLm9yZwIkSECRET", ("upload.pypi.org:443",)), ("c0rp-pw", ("up.corp.test:443",))]
    out = shown(rewrite)
    assert "SECRET" not in out and "xyzzy" not in out and "username = __token__" in out


# -- TOML --------------------------------------------------------------------------------------


def test_toml_tokens_with_a_named_host_are_marked_and_every_other_secret_withheld() -> None:
    text = '# token = "old-token-value"\n[registry]\ntoken = "cio"\n[registries.corp]\ntoken = "corp"\n[http]\nproxy = "http://x"\ncheck-revoke = false\n[env]\nGH_PAT = "ghp_abcdefghijklmnopqrstuvwxyz0123"\nPLAIN = "1"\n'
    rewrite = forms.toml(text, "~/.cargo/credentials.toml", lambda table, key: forms.CRATES_IO if table == "registry" else None)
    assert pairs(rewrite) == [("cio", ("crates.io:443",))]
    out = shown(rewrite)
    assert 'token = "PH"' in out and "corp" not in out.replace("[registries.corp]", "") and "check-revoke = false" in out
    assert "ghp_" not in out and "old-token" not in out and 'PLAIN = "1"' in out
    with pytest.raises(forms.Unreadable):
        forms.toml("[registry\n", "~/.cargo/credentials.toml")


# -- netrc ---------------------------------------------------------------------------------------


def test_netrc_logins_and_passwords_are_marked_for_a_literal_host_only() -> None:
    text = "# a comment\nmachine api.test login ghp_abcdefghijklmnopqrstu password x-oauth-basic\nmachine *.good.test login a password b\ndefault login x password y\n"
    rewrite = forms.netrc(text, "~/.netrc")
    assert pairs(rewrite) == [("ghp_abcdefghijklmnopqrstu", ("api.test",)), ("x-oauth-basic", ("api.test",))]
    assert shown(rewrite) == "machine api.test login PH password PH\n"


# -- git -----------------------------------------------------------------------------------------


def test_gitconfig_urls_headers_comments_and_own_proxy() -> None:
    text = (
        '[user]\n\tname = Bob # me\n[url "https://bob:ghp_tok@github.com/"]\n\tinsteadOf = https://github.com/\n'
        '[http "https://git.corp.test/"]\n\textraHeader = Authorization: Basic ' + base64.b64encode(b"u:pw").decode() + "\n"
        "[http]\n\textraheader = Authorization: Bearer zzz\n\tproxy = socks5://u:pw@proxy:1080\n#\textraheader = Authorization: Bearer OLD\n"
    )
    rewrite = forms.gitconfig(text, "~/.gitconfig")
    assert pairs(rewrite) == [("bob", ("github.com:443",)), ("ghp_tok", ("github.com:443",)), ("pw", ("git.corp.test:443",))]
    out = shown(rewrite)
    assert '[url "https://PH:PH@github.com/"]' in out and base64.b64encode(b"u:PH").decode() in out
    assert "zzz" not in out and "OLD" not in out and "socks5" not in out and 'name = "Bob"' in out


def test_gitconfig_forms_git_reads_but_stockade_does_not_follow_hide_the_file() -> None:
    for text in ('[http "https://h/"] extraheader = Authorization: Bearer X\n', "[user]\n\tname = a \\\n b\n"):
        with pytest.raises(forms.Unreadable):
            forms.gitconfig(text, "~/.gitconfig")


def test_each_basic_pair_keeps_its_own_user() -> None:
    pair = base64.b64encode(b"first:pw1").decode(), base64.b64encode(b"second:pw2").decode()
    text = f'[http "https://a.test/"]\n\textraHeader = Authorization: Basic {pair[0]}\n[http "https://b.test/"]\n\textraHeader = Authorization: Basic {pair[1]}\n'
    out = shown(forms.gitconfig(text, "~/.gitconfig"))
    assert base64.b64encode(b"first:PH").decode() in out and base64.b64encode(b"second:PH").decode() in out


def test_git_credentials_mark_the_user_too() -> None:
    rewrite = forms.url_lines("https://ghp_abcdefghijklmnopqrstuv:x-oauth-basic@github.com\n", "~/.git-credentials")
    assert shown(rewrite) == "https://PH:PH@github.com\n" and len(rewrite.found) == 2


# -- YAML ----------------------------------------------------------------------------------------


def test_yarnrc_yml_flow_style_and_anchors_as_yarn_reads_them() -> None:
    text = 'npmRegistryServer: "https://npm.corp.test"\nx: &t tok123\nnpmAuthToken: *t\nnpmRegistries: {"//other.test": {npmAuthIdent: "bob:pw"}}\nhttpProxy: "http://x"\nenableTelemetry: false\n'
    rewrite = forms.yaml(text, "~/.yarnrc.yml")
    assert ("tok123", ("npm.corp.test:443",)) in pairs(rewrite) and ("pw", ("other.test:443",)) in pairs(rewrite)
    out = shown(rewrite)
    assert "npmAuthIdent: bob:PH" in out and "httpProxy" not in out and "enableTelemetry: false" in out


def test_condarc_path_tokens_and_the_tools_own_proxy_and_ca_are_withheld() -> None:
    text = "channels:\n  - https://conda.anaconda.org/t/abcdefghijklmnopqrstu/corp\n  - defaults\nproxy_servers:\n  http: http://x\nssl_verify: /corp.pem\n"
    assert shown(forms.yaml(text, "~/.condarc")) == "channels:\n- defaults\n"


# -- XML, JSON, properties ---------------------------------------------------------------------------


def test_maven_passwords_go_to_the_mirror_of_the_same_id_and_other_secrets_are_emptied() -> None:
    text = (
        '<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"><servers><server><id>corp</id><username>u</username>'
        "<password><![CDATA[p&w]]></password></server><server><id>gl</id><configuration><httpHeaders><property><name>Private-Token</name>"
        "<value>glpat-abcdefghijklmnopqrst</value></property></httpHeaders></configuration></server></servers>"
        "<proxies><proxy><password>prox</password></proxy></proxies>"
        "<mirrors><mirror><id>corp</id><url>https://maven.corp.test/repo</url></mirror></mirrors><!-- old: hunter2 --></settings>"
    )
    rewrite = forms.maven_settings(text, "~/.m2/settings.xml")
    assert pairs(rewrite) == [("p&w", ("maven.corp.test:443",))]
    out = shown(rewrite)
    assert "<password>PH</password>" in out and "glpat" not in out and "prox<" not in out and "hunter2" not in out and "ns0" not in out


def test_docker_logins_headers_and_proxy_passwords_are_withheld() -> None:
    text = '{"AUTHS": {"ghcr.io": {"Auth": "eHg6eXk="}}, "credsStore": "pass", "HttpHeaders": {"X-Token": "t"}, "proxies": {"default": {"httpsProxy": "http://u:p@proxy:3128"}}}'
    rewrite = forms.docker_json(text, "~/.docker/config.json")
    assert "eHg6eXk=" not in rewrite.text and '"credsStore": "pass"' in rewrite.text and "X-Token" not in rewrite.text
    assert "u:p@" not in shown(rewrite)


def test_gradle_properties_secrets_are_withheld() -> None:
    text = "org.gradle.jvmargs=-Xmx2g\nmavenPassword=secret\ngpr.key=ghp_abcdefghijklmnopqrstu\nGITHUB_PAT=abc\n#old.token=xyz\nsigning.keyId=ABC\nLONE\n"
    assert shown(forms.properties(text, "~/.gradle/gradle.properties")) == "org.gradle.jvmargs=-Xmx2g\nsigning.keyId=ABC\n"


# -- the whole class -------------------------------------------------------------------------------


def _secret(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits
    return "Zq9" + "".join(rng.choice(alphabet) for _ in range(rng.randint(6, 37)))


READERS = [forms.npmrc, forms.ini, forms.netrc, forms.gitconfig, forms.url_lines, forms.yaml, forms.properties, forms.toml,
           forms.maven_settings, forms.docker_json, lambda text, where: forms.npmrc(text, where, spaced=True)]  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_generated_files_never_show_a_secret(seed: int) -> None:
    """Property: whatever the secrets and wherever they sit, the shown text holds none of them."""
    rng = random.Random(seed)
    a, b, c, d, e, f = (_secret(rng) for _ in range(6))
    port = rng.choice(["", ":8443"])
    cases = [
        (forms.npmrc, f"registry=https://r.test{port}/\n//r.test{port}/:_authToken={a}\n_auth={base64.b64encode(f'u:{b}'.encode()).decode()}\n"),
        (forms.ini, f"[global]\nindex-url = https://u:{c}@i.test{port}/simple\nextra-index-url =\n  https://{d}@j.test/s\n"),
        (forms.netrc, f"machine m.test login {a} password {e}\n"),
        (forms.gitconfig, f'[url "https://u:{f}@g.test/"]\n\tinsteadOf = https://g.test/\n'),
        (forms.url_lines, f"https://{a}:{b}@h.test\nhttps://v:{c}@k.test{port}\n"),
        (forms.yaml, f'npmRegistryServer: "https://y.test{port}"\nnpmAuthToken: "{c}"\n'),
        (lambda text, where: forms.toml(text, where, lambda table, key: "t.test:443"), f'[registry]\ntoken = "{d}"\n'),
    ]
    for reader, text in cases:
        out = shown(reader(text, "~/f"), "PLACEHOLDER")
        assert not any(secret in out for secret in (a, b, c, d, e, f)), (reader, text, out)


@pytest.mark.parametrize("seed", range(30))
def test_a_secret_a_reader_does_not_know_is_never_shown(seed: int) -> None:
    """A token pasted alone, commented out, under an unknown key or in a proxy URL: hidden, or shown without it."""
    rng = random.Random(seed)
    secret = "ghp_" + _secret(rng) + "x" * 16
    text = rng.choice([
        f"{secret}\n", f"# {secret}\n", f"[section]\n{secret}\n", f"  {secret}\n", f"unknown = {secret}\n", f"unknown: {secret}\n",
        f"proxy = http://u:{secret}@p.test:3128\n", f'{{"k": "{secret}"}}\n', f"<s><v>{secret}</v></s>\n", f"k:\n  - {secret}\n",
    ])  # fmt: skip
    for reader in READERS:
        try:
            out = shown(reader(text, "~/f"))
        except forms.Unreadable:
            continue
        assert secret not in out, (reader, text, out)


def test_an_address_that_is_not_a_host_hides_the_file_not_the_run() -> None:
    for reader, text in ((forms.npmrc, "registry=https://[oops/\n_authToken=x\n"), (forms.ini, "[x]\nrepository = https://[x/\npassword = p\n")):
        try:
            rewrite = reader(text, "~/f")
        except forms.Unreadable:
            continue
        assert rewrite.found == []


# -- the second review -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reader", "text", "kept"),
    [
        (
            forms.ini,
            "[global]\nindex-url = https://my-domain-111122223333.d.codeartifact.us-east-1.amazonaws.com/pypi/repo/simple/\n",
            "111122223333",
        ),
        (forms.npmrc, "registry=https://artifactory.corp01.example.com/api/npm/npm-2f8a9c31-b7d4-4e0a/\n", "2f8a9c31"),
        (forms.npmrc, "node-options=--max-old-space-size=4096\n", "4096"),
        (forms.gitconfig, "[user]\n\tsigningkey = 3AA5C34371567BD2A1B2C3D4E5F60718293A4B5C\n", "3AA5C343"),
        (forms.gitconfig, "[core]\n\tpager = /nix/store/8a9b0c1d2e3f4g5h6i7j8k9l0m-delta-0.16/bin/delta\n", "/nix/store"),
        (forms.gitconfig, "[user]\n\temail = 12345678+someone-with-a-long-name@users.noreply.github.com\n", "12345678"),
        (forms.toml, '[cargo-new]\nvcs = "none"\n[registry]\ncredential-provider = ["cargo:token"]\n', "cargo:token"),
    ],
)
def test_ordinary_settings_are_not_taken_for_secrets(reader: object, text: str, kept: str) -> None:
    """A registry withheld by mistake sends the tool to the public one: URLs, paths, options and fingerprints stay."""
    assert kept in shown(reader(text, "~/f"))  # type: ignore[operator]


@pytest.mark.parametrize(
    ("reader", "text", "secret"),
    [
        (forms.ini, "[global]\nindex-url = https://bob:correct horse@r.example.com/simple\n", "correct horse"),
        (forms.gitconfig, '[url "https:/\\/bob:hunter2@git.corp.com/"]\n\tinsteadOf = https://git.corp.com/\n', "hunter2"),
        (forms.toml, '[env]\nDB_PASSWORD = { value = "hunter2hunter", force = true }\n', "hunter2hunter"),
        (forms.yaml, "password: [{x: hunter2hunter}]\n", "hunter2hunter"),
        (forms.properties, "nexusPwd=hunter2\ndeployKey=abc123\ngitlabPat=xyz789\n", "hunter2"),
        (
            forms.maven_settings,
            "<settings><servers><server><id>gl</id><configuration><httpHeaders><property><name>Private-Token</name><value>9koXpg98eAheJpvBs5tK</value></property></httpHeaders></configuration></server></servers></settings>",
            "9koXpg98",
        ),
        (forms.npmrc, "registry=https://bob:S3cret@${NEXUS}/\n", "S3cret"),
    ],
)
def test_secrets_in_the_spellings_tools_accept_are_not_shown(reader: object, text: str, secret: str) -> None:
    try:
        out = shown(reader(text, "~/f"))  # type: ignore[operator]
    except forms.Unreadable:
        return
    assert secret not in out, out


def test_yarn_reads_a_numeric_token_as_a_token() -> None:
    rewrite = forms.yaml("npmAuthToken: 1234567890123456\n", "~/.yarnrc.yml")
    assert pairs(rewrite) == [("1234567890123456", ("registry.yarnpkg.com:443",))]


def test_labels_never_carry_a_secret() -> None:
    rewrite = forms.gitconfig('[url "https://oauth2:glpat-AbCdEfGhIjKlMnOpQrSt@gitlab.com/"]\n\tinsteadOf = https://gitlab.com/\n', "~/.gitconfig")
    said = " ".join([*(found.key for found in rewrite.found), *rewrite.withheld])
    assert "glpat" not in said and "oauth2:" not in said


def test_a_password_goes_to_the_host_the_tool_reads_not_one_after_a_question_mark() -> None:
    rewrite = forms.ini("[corp]\nrepository = https://upload.corp.com?@evil.example\npassword = pw\n", "~/.pypirc")
    assert all("evil" not in host for found in rewrite.found for host in found.hosts)


def test_a_yaml_alias_bomb_is_refused_quickly() -> None:
    text = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(7)
    )
    with pytest.raises(forms.Unreadable):
        forms.yaml(text, "~/.condarc")


def test_a_comment_after_a_heading_or_a_bom_keeps_the_gitconfig() -> None:
    out = shown(forms.gitconfig("\ufeff[user] # me\n\tname = Bob\n", "~/.gitconfig"))
    assert 'name = "Bob"' in out


@pytest.mark.parametrize("seed", range(20))
def test_every_host_rule_made_is_one_the_daemon_takes(seed: int) -> None:
    """host_rule checks names without profiles.domains (off the run's path): whatever it accepts,
    parse_rule must take too, or the daemon would refuse the run's whole session."""
    from stockade.profiles.domains import parse_rule

    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "-._:[]*@%"
    for _ in range(300):
        host = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
        try:
            rule = forms.host_rule("https", host)
        except forms.Unreadable:
            continue
        parse_rule(rule)
    for host in ("registry.npmjs.org", "NPM.Corp.Example.", "10.1.2.3:8443", "localhost", "a-b.c-d.test:1"):
        parse_rule(forms.host_rule("https", host))
