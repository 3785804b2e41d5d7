"""The mitmproxy addons a filter runs, imported without the thirty it does not.

`mitmproxy/addons/__init__.py` imports every default addon (the onboarding
web app with Flask, proxy authentication with LDAP, replay, HAR export...),
and Python runs a package's `__init__` before any of its modules. That is a
third of the daemon's start (about 150 ms of 450 on 2 cores), paid by every
run that finds no daemon. So the package is entered as a plain folder first:
its modules import as usual, and the package's own code runs only if
something asks it for a name it defines (`default_addons`, which mitmproxy's
own tools use), at which point it runs whole, as if imported normally.

Import this module before anything imports from `mitmproxy.addons`.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from importlib.machinery import PathFinder


def _enter_as_folder(name: str) -> None:
    """Put a module for package `name` in sys.modules that finds its submodules but runs no `__init__` yet."""
    if name in sys.modules:
        return  # already imported for real: nothing to save
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None or spec.loader is None:
        return
    package = types.ModuleType(name)
    package.__spec__ = spec
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = name
    package.__file__ = spec.origin
    loader = spec.loader
    running: list[bool] = []

    def complete(attribute: str) -> object:
        """PEP 562: a name only the package's own code defines. Run that code now, once.

        A submodule not imported yet is no such name: the import system asks for it
        (`from package import module`) before it imports it.
        """
        if running or attribute.startswith("__") or PathFinder.find_spec(f"{name}.{attribute}", package.__path__) is not None:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        running.append(True)
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, attribute)

    package.__dict__["__getattr__"] = complete
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)  # what the import system does for a submodule it imported


_enter_as_folder("mitmproxy.addons")

from mitmproxy.addons import block, core, disable_h2c, next_layer, proxyserver, tlsconfig  # noqa: E402

__all__ = ["block", "core", "disable_h2c", "next_layer", "proxyserver", "tlsconfig"]
