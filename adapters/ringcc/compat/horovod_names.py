"""What ringcc's `horovod` alias binds (ringcc.compat.horovod_alias writes
the package, whose __init__ calls bind()): `horovod.run` is ringcc.run,
`horovod.__version__` ringcc's version, `horovod.__ringcc_alias__` True, and
the modules `horovod.torch`, `horovod.tensorflow` (with .keras),
`horovod.keras`, `horovod.mxnet` and `horovod.ray` are ringcc's, each
imported only when a script imports or touches it (so `import horovod` does
not import TensorFlow). A submodule `horovod.X.Y` is ringcc's `X.Y`: the
same module object, not a copy.

Importing the alias fails when a real Horovod is installed elsewhere on
sys.path, which the alias would otherwise hide."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys

# horovod.<name> -> ringcc's module.
ALIASES = {
    "torch": "ringcc.torch",
    "tensorflow": "ringcc.tensorflow",
    "keras": "ringcc.keras",
    "mxnet": "ringcc.mxnet",
    "ray": "ringcc.ray",
}
MARKER = "__ringcc_alias__ = True"


def target_of(fullname: str, package: str = "horovod") -> str | None:
    """ringcc's module for `fullname` (horovod.torch.elastic -> ringcc.torch.elastic), or None."""
    parts = fullname.split(".")
    if len(parts) < 2 or parts[0] != package or parts[1] not in ALIASES:
        return None
    return ".".join([ALIASES[parts[1]], *parts[2:]])


class _AliasLoader(importlib.abc.Loader):
    """Imports ringcc's module and puts it in sys.modules under Horovod's name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        sys.modules[module.__name__] = importlib.import_module(self.target)  # the import system takes it from there
        # Submodules a module registers itself (ringcc.tensorflow.keras's
        # .callbacks, a module that is not a package) under Horovod's name too.
        prefix = self.target + "."
        for name, submodule in list(sys.modules.items()):
            if name.startswith(prefix):
                sys.modules.setdefault(module.__name__ + name[len(self.target) :], submodule)


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds horovod.torch and the other aliased modules (first on sys.meta_path)."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname, path=None, target=None):
        ringcc_name = target_of(fullname, self.package)
        if ringcc_name is None:
            return None
        try:
            if importlib.util.find_spec(ringcc_name) is None:
                return None
        except ImportError:  # ringcc.tensorflow's parent fails to import: no such module here
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(ringcc_name))


def _install_finder(package: str) -> None:
    if not any(isinstance(f, AliasFinder) and f.package == package for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder(package))


def is_alias(package_dir: str) -> bool:
    try:
        with open(os.path.join(package_dir, "__init__.py"), encoding="utf-8") as file:
            return MARKER in file.read()
    except OSError:
        return False


def real_horovod_on_path(paths, own_dir: str | None = None) -> str | None:
    """The first `horovod` package or module on `paths` that is not ringcc's alias."""
    for entry in paths:
        base = os.path.abspath(entry or os.curdir)
        package_dir = os.path.join(base, "horovod")
        if own_dir is not None and os.path.abspath(package_dir) == os.path.abspath(own_dir):
            continue
        if os.path.isfile(os.path.join(package_dir, "__init__.py")) and not is_alias(package_dir):
            return package_dir
        if os.path.isfile(package_dir + ".py"):
            return package_dir + ".py"
    return None


def bind(namespace: dict) -> None:
    """Fills the alias package's namespace (its __init__ passes globals())."""
    package = namespace["__name__"]
    own_dir = os.path.dirname(namespace["__file__"])
    real = real_horovod_on_path(sys.path, own_dir)
    if real is not None:
        raise ImportError(
            f"a real Horovod is installed ({real}) beside ringcc's horovod alias ({own_dir}), which would hide "
            "it; remove the alias: python -m ringcc.compat uninstall-horovod-alias"
        )
    import ringcc

    _install_finder(package)

    def __getattr__(name):
        if name in ALIASES:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} (ringcc's alias of Horovod) has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(ALIASES))

    namespace.update(
        __version__=ringcc.__version__,
        __ringcc_alias__=True,
        run=ringcc.run,
        __getattr__=__getattr__,
        __dir__=__dir__,
    )
