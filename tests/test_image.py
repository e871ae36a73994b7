"""deploy/Dockerfile without Docker: its build steps run as root, its server as its user.

No Docker engine runs here, so the test plays the image's build itself. It reads the
Dockerfile, copies what its COPY lines copy into a scratch root, and runs its RUN lines
there as root, verbatim, in its WORKDIR with its ENV (container paths moved under the
scratch root): `pip install --no-cache-dir .` installs the package into a fresh
virtualenv and the bundled tokenizers are built by the Dockerfile's own command. Then
it starts the installed `derender-server` with the ENTRYPOINT and CMD as the USER's
uid, with a home that does not exist, and derenders a chunk through it.

What it does not prove, and why:
- The base image is this machine's Python, not `python:3.11-slim`. The package's
  dependencies are not installed again (that would take minutes): the virtualenv sees
  the test's own site-packages through a `.pth` line, so `pip install .` finds them
  satisfied and installs the package alone, built from the copied sources (its
  isolated build fetches setuptools from PyPI, as `docker build` would).
- The `useradd` step is not run (it would add a user to this machine); the test checks
  that it creates the USER's uid, and runs the server as that uid with no passwd entry.
- This machine's interpreter may live under a directory the uid cannot enter (a Python
  in root's home): the run then happens in a private mount namespace where that
  directory is covered by an empty world-readable one with only the interpreter's
  folder bound back in. Nothing the build wrote is exposed or changed that way.
Needs root (to build as root and switch uid); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import site
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support.processes import ROOT, free_port

DOCKERFILE = ROOT / "deploy" / "Dockerfile"
HADOLINT = shutil.which("hadolint") or shutil.which(
    "hadolint", path=str(Path(sys.executable).parent)
)


@dataclass
class Image:
    """What the Dockerfile says, instruction by instruction."""

    copies: list[tuple[list[str], str]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = "root"
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    exposed: list[str] = field(default_factory=list)


def read_dockerfile(path: Path) -> Image:
    """The instructions this test knows how to play; any other fails the test, so a new
    one in the Dockerfile is either taught here or noticed."""
    text = re.sub(r"\\\n", " ", path.read_text())
    image = Image()
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, rest = line.strip().partition(" ")
        match instruction.upper():
            case "FROM":
                pass  # the base: this machine's Python (see the module docstring)
            case "WORKDIR":
                image.workdir = rest.strip()
            case "COPY":
                *sources, target = shlex.split(rest)
                image.copies.append((sources, target))
            case "RUN":
                image.runs.append(rest.strip())
            case "ENV":
                image.env.update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
            case "USER":
                image.user = rest.strip()
            case "EXPOSE":
                image.exposed.append(rest.strip())
            case "ENTRYPOINT":
                image.entrypoint = json.loads(rest)
            case "CMD":
                image.cmd = json.loads(rest)
            case _:
                raise AssertionError(f"tests/test_image.py cannot play {instruction}: {line}")
    return image


def under(root: Path, container_path: str) -> Path:
    return root / container_path.lstrip("/")


def blocked_ancestor(path: Path) -> Path | None:
    """The outermost directory above ``path`` that others may not enter."""
    for parent in reversed(path.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def exposing(paths: list[Path]) -> str:
    """Shell lines (for a private mount namespace) that let another uid reach ``paths``:
    a blocked directory above them is covered by an empty world-readable tmpfs, and the
    folders under it that lead to them are bound back in (each set aside first)."""
    children: dict[Path, set[Path]] = {}
    for path in paths:
        blocked = blocked_ancestor(path)
        if blocked is not None:
            children.setdefault(blocked, set()).add(blocked / path.relative_to(blocked).parts[0])
    lines = []
    for number, (blocked, kept) in enumerate(sorted(children.items())):
        aside = [
            (f"/tmp/.derender-image-{os.getpid()}-{number}-{i}", c)
            for i, c in enumerate(sorted(kept))
        ]
        for stash, child in aside:
            lines += [f"mkdir -p {stash}", f"mount --bind {shlex.quote(str(child))} {stash}"]
        lines.append(f"mount -t tmpfs -o mode=755 none {shlex.quote(str(blocked))}")
        for stash, child in aside:
            lines += [
                f"mkdir {shlex.quote(str(child))}",
                f"mount --bind {stash} {shlex.quote(str(child))}",
                f"umount {stash}",
                f"rmdir {stash}",
            ]
    return "\n".join(lines)


def as_user(
    uid: int, argv: list[str], env: dict[str, str], cwd: Path, reach: list[Path]
) -> list[str]:
    """The command that runs ``argv`` as ``uid`` (no groups, only ``env``) in ``cwd``, able
    to reach this interpreter, its site-packages and ``reach`` and nothing more."""
    interpreter = Path(os.path.realpath(sys.executable))
    needed = [interpreter, Path(sys.base_prefix), *map(Path, site.getsitepackages()), *reach]
    script = "\n".join(
        [
            "set -e",
            exposing(needed),
            f"cd {shlex.quote(str(cwd))}",
            f"exec setpriv --reuid {uid} --regid {uid} --clear-groups -- "
            f"env -i {' '.join(shlex.quote(f'{k}={v}') for k, v in env.items())} "
            f"{shlex.join(argv)}",
        ]
    )
    # unshare, the shell, setpriv and env each exec the next: one pid.
    return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script]


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A scratch root another uid may enter (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="derender-image-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(HADOLINT is None, reason="hadolint missing: scripts/install installs it")
def test_the_dockerfile_passes_hadolint() -> None:
    assert HADOLINT is not None
    lint = subprocess.run([HADOLINT, str(DOCKERFILE)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def build(image: Image, root: Path) -> tuple[Path, dict[str, str]]:
    """The Dockerfile's COPY and RUN steps as root into ``root``: the virtualenv that
    stands for the base image's Python, and the environment the steps ran with."""
    python = root / "usr" / "local"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(python)], check=True)
    [site_packages] = python.glob("lib/python*/site-packages")
    # The dependencies, already installed for the tests (not installed again), pip among
    # them: the base image's `pip` is this one, run by the virtualenv's Python.
    (site_packages / "test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip = python / "bin" / "pip"
    pip.write_text(f'#!/bin/sh\nexec {python / "bin" / "python"} -m pip "$@"\n')
    pip.chmod(0o755)
    workdir = under(root, image.workdir)
    workdir.mkdir(parents=True)
    for sources, target in image.copies:
        destination = workdir / target
        for source in sources:
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(origin, destination, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                destination.mkdir(parents=True, exist_ok=True)
                shutil.copy(origin, destination)
    env = {
        name: str(under(root, value)) if value.startswith("/") else value
        for name, value in image.env.items()
    }
    build_env = {
        "PATH": f"{python / 'bin'}:/usr/bin:/bin",
        "HOME": str(root / "root"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **env,
    }
    for command in image.runs:
        if command.startswith("useradd "):
            uid = re.search(r"--uid (\d+)", command)
            assert uid is not None and uid[1] == image.user, command
            continue
        done = subprocess.run(
            ["/bin/sh", "-c", command], cwd=workdir, env=build_env, capture_output=True,
            text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"RUN {command}\n{done.stdout}\n{done.stderr}"
    return python, env


@pytest.mark.skipif(os.geteuid() != 0, reason="builds as root and runs as another uid: root only")
def test_the_image_builds_as_root_and_serves_as_its_user(scratch: Path) -> None:
    image = read_dockerfile(DOCKERFILE)
    assert image.user.isdigit() and int(image.user) != 0, "the server runs unprivileged"
    assert image.entrypoint[0] == "derender-server"
    assert image.exposed == ["8000"]
    root = scratch / "root"
    python, env = build(image, root)
    uid = int(image.user)

    # Everything the build wrote for the server is the user's to read, never to write.
    served = [under(root, image.workdir), python]
    for path in [*served, *(p for top in served for p in top.rglob("*"))]:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        assert mode & stat.S_IROTH, f"{path} is not readable by uid {uid}"
        if stat.S_ISDIR(mode):
            assert mode & stat.S_IXOTH, f"{path} cannot be entered by uid {uid}"
        assert not mode & stat.S_IWOTH, f"{path} is writable by anyone"

    port = free_port()
    argv = [
        str(python / "bin" / image.entrypoint[0]), *image.entrypoint[1:], *image.cmd,
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    run_env = {
        "PATH": f"{python / 'bin'}:/usr/bin:/bin",
        "HOME": "/nonexistent",  # the image's user has no home
        **env,
    }
    command = as_user(uid, argv, run_env, cwd=under(root, image.workdir), reach=[root])
    log = scratch / "server.log"
    with log.open("w") as sink:
        server = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "no /health in time\n" + log.read_text()
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            chunk = {
                "stream": True,
                "generate_chunk": {
                    "request_id": "image",
                    "choices": [{"index": 0, "token_ids": [9707, 0, 2585, 646, 358, 1492]}],
                },
                "prompt_token_ids": [151644, 872, 198],
                "chat_request": {
                    "messages": [{"role": "user", "content": "Hi"}],
                    "chat_template_kwargs": {"enable_thinking": False},
                },
            }
            reply = httpx.post(f"{url}/v1/chat/completions/derender", json=chunk, timeout=30)
            assert reply.status_code == 200, reply.text
            delta = reply.json()["chunk"]["choices"][0]["delta"]
            assert delta["content"] == "Hello! How can I help", delta
            status = Path(f"/proc/{server.pid}/status").read_text()
            assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", status, re.M)
        finally:
            server.terminate()
            server.wait(timeout=30)
    text = log.read_text()
    # The tokenizer the build made is the one served: nothing is built at start.
    assert "building the bundled" not in text, text
    assert "model: qwen3" in text, text


@pytest.mark.skipif(os.geteuid() != 0, reason="builds as root and runs as another uid: root only")
def test_a_tokenizer_another_user_cannot_read_is_named_with_the_uid(scratch: Path) -> None:
    """What an image built before the fix said: 'scripts/install installs the package',
    for a directory its user could not read."""
    cache = scratch / "cache"
    env = {"DERENDER_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    build = subprocess.run(
        [sys.executable, "-c", "from app.tokens.tokenizer import BUNDLED; BUNDLED['deepseek']()"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    built = cache / "deepseek-v2"
    assert stat.S_IMODE(built.stat().st_mode) == 0o755
    built.chmod(0o700)  # as the build left it before
    argv = [sys.executable, "-m", "app", "--model", "deepseek", "--port", str(free_port())]
    run_env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "PYTHONPATH": str(ROOT), **env}
    refused = subprocess.run(
        as_user(10001, argv, run_env, cwd=scratch, reach=[ROOT, scratch]),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode != 0
    error = refused.stderr.strip().splitlines()[-1]
    assert f"permission denied on {built / 'tokenizer.json'} for uid 10001" in error, error
    assert "DERENDER_CACHE_DIR" in error and "scripts/install" not in error


def test_the_deploy_readme_builds_and_runs_the_image_this_test_plays() -> None:
    readme = (ROOT / "deploy" / "README.md").read_text()
    image = read_dockerfile(DOCKERFILE)
    assert "docker build -f deploy/Dockerfile -t derender-server:0.1.0 .\n" in readme
    assert "docker build -f deploy/Dockerfile -t derender-server ." in DOCKERFILE.read_text()
    assert f"(`{' '.join(image.cmd)}`)" in readme
    assert f"uid {image.user}" in readme
    assert image.env["DERENDER_CACHE_DIR"] in readme
