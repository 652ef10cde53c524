"""The image's build context (`COPY . .` in the Dockerfile) holds what the image runs and no
secret: `.env` (where the runbook puts the OpenBao AppRole secret), the Prometheus token file,
keys and the data folder were all sent to the builder, into a layer of the image and its cache.
The context is listed here by docker-py's implementation of `.dockerignore` over a copy of the
checkout (its tracked files) with those secrets planted, as an operator's checkout holds them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from docker.utils.build import exclude_paths  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
PLANTED = [
    ".env",
    ".env.production",
    "deploy/prometheus/maascp-token",
    "deploy/tls/api.key",
    "deploy/tls/api.pem",
    "var/api-token",
    "var/secrets.key",
    "var/django-secret-key",
    "config/.env",
    "maas_domain/leftover.key",
    "notes/root-token.txt",
]
# what the image runs: the product's packages, its templates, the project and lock files
IMAGE_NEEDS = ("config/", "maas_client/", "maas_domain/", "workflows/", "onboarding/",
               "decommission/", "reconciliation/", "templates/", "maasctl/")  # fmt: skip
IMAGE_NEEDS_FILES = {"manage.py", "pyproject.toml", "uv.lock", ".python-version"}
LEFT_OUT = ("maas_simulator/", "devtools/", "tests/", "benchmarks/", "docs/", "deploy/", ".git/")


def context_of(root: Path) -> set[str]:
    """The files `docker build` sends for ``root``: .dockerignore read as the Docker client does
    (blank lines and ``#`` comments skipped)."""
    lines = (root / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return {
        path
        for path in exclude_paths(str(root), patterns, dockerfile="Dockerfile")
        if (root / path).is_file()
    }


def checkout_with_secrets(tmp_path: Path) -> Path:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in [*tracked, *PLANTED]:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        source = ROOT / name
        target.write_bytes(source.read_bytes() if source.is_file() else b"secret\n")
    return tmp_path


def test_no_secret_enters_the_build_context(tmp_path: Path) -> None:
    context = context_of(checkout_with_secrets(tmp_path))
    assert not context & set(PLANTED), sorted(context & set(PLANTED))
    assert not [p for p in context if p.startswith(LEFT_OUT)]


def test_the_context_holds_what_the_image_runs(tmp_path: Path) -> None:
    root = checkout_with_secrets(tmp_path)
    context = context_of(root)
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    needed = {p for p in tracked if p.startswith(IMAGE_NEEDS) and "__pycache__" not in p}
    needed |= IMAGE_NEEDS_FILES
    assert needed <= context, sorted(needed - context)[:20]
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and " . " not in line:  # the named files it copies first
            assert set(line.split()[1:-1]) <= context, line
