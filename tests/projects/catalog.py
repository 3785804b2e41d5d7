"""The real projects whose own test suites must give the same result inside stockade as outside.

Each is pinned (its release and its test dependencies), fetched once from PyPI
or npm into a cache, and run bare and then under `stockade run --profile
default` on fresh copies at the same path (test_projects.py). Chosen for what
they exercise: git and subprocesses (setuptools-scm, whose signed-commit test
starts gpg-agent over a unix socket), a coverage tool that spawns children and
writes scratch into the home (nyc's spawn-wrap, for minimist), a test server on
a unix socket (requests-unixsocket with waitress), and plain large suites.
"""

from __future__ import annotations

from dataclasses import dataclass

PYTEST = "pytest==8.3.3"


@dataclass(frozen=True)
class Project:
    name: str
    kind: str  # "pypi" (an sdist) or "npm" (a tarball)
    spec: str  # what to fetch, pinned
    deps: tuple[str, ...]  # pinned test dependencies
    command: tuple[str, ...]  # run in the copy; "{venv}" is the project's virtualenv, "{bin}" its node_modules/.bin
    why: str
    profile: str = "default"  # the built-in profile the sandboxed run uses (one allowing the hosts its tests need)
    # As root only: (why, the counts inside less the counts bare, the exit status inside)
    root_difference: tuple[str, dict[str, int], int] | None = None


PROJECTS: tuple[Project, ...] = (
    Project(
        "more-itertools",
        "pypi",
        "more-itertools==10.5.0",
        (PYTEST,),
        ("{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"),
        "a plain suite",
    ),
    Project(
        "packaging",
        "pypi",
        "packaging==24.2",
        (PYTEST, "pretend==1.0.9"),
        ("{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"),
        "26,000 parametrised tests",
    ),
    Project(
        "python-dateutil",
        "pypi",
        "python-dateutil==2.9.0.post0",
        (PYTEST, "pytest-cov==5.0.0", "freezegun==1.5.1", "hypothesis==6.112.1", "six==1.16.0"),
        ("{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"),
        "time zones from the system's files",
    ),
    Project(
        "python-dotenv",
        "pypi",
        "python-dotenv==1.0.1",
        (PYTEST, "sh==1.14.3", "click==8.1.7"),
        ("{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"),
        "its CLI run as subprocesses",
        root_difference=(
            "as root the sandbox has no capabilities, so a file chmod 000 is unreadable inside as it is for any "
            "user; bare root reads it, and two tests expect the PermissionError",
            {"failed": -2, "passed": 2},
            0,
        ),
    ),
    Project(
        "attrs",
        "pypi",
        "attrs==24.2.0",
        (PYTEST, "hypothesis==6.112.1", "pympler==1.1", "cloudpickle==3.0.0"),
        ("{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"),
        "hypothesis writes its database in the project",
    ),
    Project(
        "setuptools-scm",
        "pypi",
        "setuptools-scm==8.1.0",
        (PYTEST, "build==1.2.2", "wheel==0.44.0", "rich==13.8.1"),
        ("{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "testing"),
        "git repositories, subprocesses and gpg-agent on a unix socket",
        profile="pypi",
    ),  # test_pip_download fetches from PyPI: its hosts are allowed, through the proxy
    # test_unix_domain_adapter_ok fails about one run in fifteen bare (waitress sends the body
    # before the status line: BadStatusLine('Hello world!HTTP/1.1 200 OK')); a rerun, bare and
    # inside alike, keeps a failure the sandbox causes every time and drops the upstream race.
    Project(
        "requests-unixsocket",
        "pypi",
        "requests-unixsocket==0.3.0",
        (PYTEST, "waitress==3.0.0", "requests==2.31.0", "urllib3==1.26.20", "pytest-rerunfailures==14.0"),
        ("{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--reruns", "2", "requests_unixsocket/tests"),
        "a waitress server on a unix socket in the sandbox's /tmp",
    ),
    Project(
        "minimist",
        "npm",
        "minimist@1.2.8",
        ("nyc@10.3.2", "tape@5.6.3"),
        ("{bin}/nyc", "{bin}/tape", "test/**/*.js"),
        "nyc's spawn-wrap writes ~/.node-spawn-wrap-* and wraps every child",
    ),
)
