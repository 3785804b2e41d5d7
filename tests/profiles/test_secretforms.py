"""Each reader finds the secrets of its format, names their hosts, and leaves everything else as it was."""

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


def test_npmrc_tokens_basic_pairs_and_passwords_go_to_their_registry() -> None:
    text = (
        "registry=https://npm.corp.test/\n//npm.corp.test/:_authToken=npm_SECRET\n"
        f"_auth={base64.b64encode(b'bob:pw1').decode()}\n//x.test:8443/:_password={base64.b64encode(b'pw2').decode()}\n"
        "//x.test:8443/:username=bob\nproxy=http://corp:3128\nfund=false\n//e.test/:_authToken=${NPM_TOKEN}\n"
    )
    rewrite = forms.npmrc(text, "~/.npmrc")
    assert [(f.value, f.hosts) for f in rewrite.found] == [
        ("npm_SECRET", ("npm.corp.test:443",)), ("pw1", ("npm.corp.test:443",)), ("pw2", ("x.test:8443",))
    ]  # fmt: skip
    out = shown(rewrite)
    assert "//npm.corp.test/:_authToken=PH" in out and f"_auth={base64.b64encode(b'bob:PH').decode()}" in out
    assert f"//x.test:8443/:_password={base64.b64encode(b'PH').decode()}" in out
    assert "fund=false" in out and "username=bob" in out and "${NPM_TOKEN}" in out and "proxy" not in out
    assert rewrite.withheld == ["~/.npmrc: proxy (a proxy of the tool's own: inside, stockade's filter is the proxy)"]


def test_an_unknown_secret_looking_key_is_withheld_not_shown() -> None:
    rewrite = forms.npmrc("//r.test/:otp-secret=abc\ncolor=false\n", "~/.npmrc")
    assert "abc" not in shown(rewrite) and "color=false" in shown(rewrite) and len(rewrite.withheld) == 1


def test_pip_conf_passwords_in_every_index_url_continuation_lines_included() -> None:
    text = "[global]\nindex-url = https://al:p%40ss@pypi.corp.test/simple\nextra-index-url =\n    https://pypi.org/simple\n    https://tok:abc@other.test:8443/s\nproxy = http://u:p@proxy:8080\n  http://continued\ntimeout = 60\n"
    rewrite = forms.ini(text, "~/.config/pip/pip.conf")
    assert [(f.value, f.hosts) for f in rewrite.found] == [("p@ss", ("pypi.corp.test:443",)), ("abc", ("other.test:8443",))]
    out = shown(rewrite)
    assert "https://al:PH@pypi.corp.test/simple" in out and "https://pypi.org/simple" in out and "timeout = 60" in out
    assert "proxy" not in out and "continued" not in out


def test_pypirc_password_goes_to_its_repository() -> None:
    text = "[distutils]\nindex-servers = pypi corp\n[pypi]\nusername = __token__\npassword = pypi-AgEN\n[corp]\nrepository = https://up.corp.test/\npassword = c0rp\n[orphan]\npassword = x\n"
    rewrite = forms.ini(text, "~/.pypirc")
    assert [(f.value, f.hosts) for f in rewrite.found] == [("pypi-AgEN", ("upload.pypi.org:443",)), ("c0rp", ("up.corp.test:443",))]
    assert "x" not in shown(rewrite).split("[orphan]")[1]


def test_toml_tokens_with_a_named_host_are_marked_and_the_rest_withheld() -> None:
    text = '[registry]\ntoken = "cio"\n[registries.corp]\ntoken = "corp"\n[http]\nproxy = "http://x"\ncheck-revoke = false\n'
    rewrite = forms.toml(text, "~/.cargo/credentials.toml", lambda table, key: forms.CRATES_IO if table == "registry" else None)
    assert [(f.value, f.hosts) for f in rewrite.found] == [("cio", ("crates.io:443",))]
    out = shown(rewrite)
    assert 'token = "PH"' in out and "corp" not in out.replace("[registries.corp]", "") and "check-revoke = false" in out
    with pytest.raises(forms.Unreadable):
        forms.toml('[registry]\ntoken = """\nabc"""\n', "~/.cargo/credentials.toml")


def test_netrc_machines_get_placeholders_the_default_entry_is_withheld() -> None:
    rewrite = forms.netrc("machine api.test login bob password s3cr3t\ndefault login x password y\n", "~/.netrc")
    assert [(f.value, f.hosts) for f in rewrite.found] == [("s3cr3t", ("api.test",))]
    assert shown(rewrite) == 'machine api.test login bob password PH\ndefault login x password ""\n'
    with pytest.raises(forms.Unreadable):
        forms.netrc("macdef init\nmachine a password b\n", "~/.netrc")


def test_gitconfig_urls_and_extra_headers_for_a_url() -> None:
    text = (
        '[user]\n\tname = Bob\n[url "https://bob:ghp_tok@github.com/"]\n\tinsteadOf = https://github.com/\n'
        '[http "https://git.corp.test/"]\n\textraHeader = Authorization: Basic ' + base64.b64encode(b"u:pw").decode() + "\n"
        "[http]\n\textraheader = Authorization: Bearer zzz\n"
    )
    rewrite = forms.gitconfig(text, "~/.gitconfig")
    assert [(f.value, f.hosts) for f in rewrite.found] == [("ghp_tok", ("github.com:443",)), ("pw", ("git.corp.test:443",))]
    out = shown(rewrite)
    assert "https://bob:PH@github.com/" in out and base64.b64encode(b"u:PH").decode() in out and "zzz" not in out and "name = Bob" in out


def test_yarnrc_yml_tokens_go_to_the_registry_they_sit_under() -> None:
    text = 'npmRegistryServer: "https://npm.corp.test"\nnpmAuthToken: "tok123"\nnpmRegistries:\n  "https://other.test":\n    npmAuthIdent: "bob:pw"\nhttpProxy: "http://x"\nenableTelemetry: false\n'
    rewrite = forms.yaml_lines(text, "~/.yarnrc.yml")
    assert [(f.value, f.hosts) for f in rewrite.found] == [("tok123", ("npm.corp.test:443",)), ("pw", ("other.test:443",))]
    out = shown(rewrite)
    assert 'npmAuthIdent: "bob:PH"' in out and "httpProxy" not in out and "enableTelemetry: false" in out


def test_condarc_path_tokens_and_the_tools_own_proxy_are_withheld() -> None:
    text = "channels:\n  - https://conda.anaconda.org/t/abcdefghijklmnopqrstu/corp\n  - defaults\nproxy_servers:\n  http: http://x\n  https: http://y\nssl_verify: true\n"
    out = shown(forms.yaml_lines(text, "~/.condarc"))
    assert out == "channels:\n  - defaults\nssl_verify: true\n"
    with pytest.raises(forms.Unreadable):
        forms.yaml_lines("note: |\n  text\n", "~/.condarc")


def test_maven_passwords_go_to_the_mirror_of_the_same_id() -> None:
    text = (
        "<settings><servers><server><id>corp</id><username>u</username><password>p&amp;w</password></server>"
        "<server><id>nope</id><password>x</password></server></servers>"
        "<mirrors><mirror><id>corp</id><url>https://maven.corp.test/repo</url></mirror></mirrors></settings>"
    )
    rewrite = forms.maven_settings(text, "~/.m2/settings.xml")
    assert [(f.value, f.hosts) for f in rewrite.found] == [("p&w", ("maven.corp.test:443",))]
    assert "<password>PH</password>" in shown(rewrite) and "<password></password>" in shown(rewrite)
    with pytest.raises(forms.Unreadable):
        forms.maven_settings("<settings>", "~/.m2/settings.xml")


def test_docker_logins_are_withheld_and_helpers_kept() -> None:
    rewrite = forms.docker_json('{"auths": {"ghcr.io": {"auth": "eHg6eXk="}}, "credsStore": "pass"}', "~/.docker/config.json")
    assert "eHg6eXk=" not in rewrite.text and '"credsStore": "pass"' in rewrite.text and not rewrite.found


def test_gradle_properties_secrets_are_withheld() -> None:
    out = shown(forms.properties("org.gradle.jvmargs=-Xmx2g\nmavenPassword=secret\nsigning.keyId=ABC\n", "~/.gradle/gradle.properties"))
    assert out == "org.gradle.jvmargs=-Xmx2g\nsigning.keyId=ABC\n"


def _secret(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "-_") for _ in range(rng.randint(8, 40)))


@pytest.mark.parametrize("seed", range(40))
def test_generated_files_never_show_a_secret(seed: int) -> None:
    """Property: whatever the secrets and wherever they sit, the shown text holds none of them."""
    rng = random.Random(seed)
    secrets = [_secret(rng) for _ in range(6)]
    a, b, c, d, e, f = secrets
    port = rng.choice(["", ":8443"])
    cases = [
        (forms.npmrc, f"registry=https://r.test{port}/\n//r.test{port}/:_authToken={a}\n_auth={base64.b64encode(f'u:{b}'.encode()).decode()}\n"),
        (forms.ini, f"[global]\nindex-url = https://u:{c}@i.test{port}/simple\nextra-index-url =\n  https://{d}{'x' * 20}@j.test/s\n"),
        (forms.netrc, f"machine m.test login u password {e}\n"),
        (forms.gitconfig, f'[url "https://u:{f}@g.test/"]\n\tinsteadOf = https://g.test/\n'),
        (forms.url_lines, f"https://u:{a}@h.test\nhttps://v:{b}@k.test{port}\n"),
        (forms.yaml_lines, f'npmRegistryServer: "https://y.test{port}"\nnpmAuthToken: "{c}"\n'),
        (lambda text, where: forms.toml(text, where, lambda table, key: "t.test:443"), f'[registry]\ntoken = "{d}"\n'),
    ]
    for reader, text in cases:
        out = shown(reader(text, "~/f"), "PLACEHOLDER")
        assert not any(secret in out for secret in secrets), (reader, text, out)


def test_each_basic_pair_keeps_its_own_user() -> None:
    """Two extraHeaders with Basic pairs: the first placeholder is spelled with the first user, not the last."""
    pair = base64.b64encode(b"first:pw1").decode(), base64.b64encode(b"second:pw2").decode()
    text = f'[http "https://a.test/"]\n\textraHeader = Authorization: Basic {pair[0]}\n[http "https://b.test/"]\n\textraHeader = Authorization: Basic {pair[1]}\n'
    out = shown(forms.gitconfig(text, "~/.gitconfig"))
    assert base64.b64encode(b"first:PH").decode() in out and base64.b64encode(b"second:PH").decode() in out


READERS = [forms.npmrc, forms.ini, forms.netrc, forms.gitconfig, forms.url_lines, forms.yaml_lines, forms.properties, forms.toml,
           forms.maven_settings, forms.docker_json, lambda text, where: forms.npmrc(text, where, spaced=True)]  # fmt: skip


@pytest.mark.parametrize("seed", range(20))
def test_a_secret_alone_on_a_line_is_never_shown(seed: int) -> None:
    """A store written in no format the reader knows (a token pasted alone): hidden, or shown without it."""
    rng = random.Random(seed)
    secret = _secret(rng)
    text = rng.choice([f"{secret}\n", f"# a comment\n{secret}\n", f"[section]\n{secret}\n", f"  {secret}\n"])
    for reader in READERS:
        try:
            out = shown(reader(text, "~/f"))
        except forms.Unreadable:
            continue
        assert secret not in out, (reader, text, out)
