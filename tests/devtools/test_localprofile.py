"""make run's admin token survives restarts, and its maasctl profile is written where maasctl
looks, never over the user's own (devtools/localprofile.py, docs/cli.md "Configuration")."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from devtools import localprofile
from maas_domain.models import ApiToken
from maasctl.config import load

pytestmark = pytest.mark.django_db


def test_the_token_is_kept_across_restarts_and_renewed_when_it_must_be(
    admin_user: Any, tmp_path: Path
) -> None:
    first, minted = localprofile.embedded_token(user=admin_user, data_dir=tmp_path)
    assert minted and first.startswith("mcp_")
    kept = localprofile.token_file(tmp_path)
    assert kept.read_text() == first + "\n" and kept.stat().st_mode & 0o777 == 0o600
    assert localprofile.embedded_token(user=admin_user, data_dir=tmp_path) == (first, False)
    row = ApiToken.objects.get(revoked_at__isnull=True)
    assert (row.name, row.scope) == ("embedded", "admin")
    row.expires_at = timezone.now() + timedelta(days=2)  # about to expire: renewed
    row.save()
    second, minted = localprofile.embedded_token(user=admin_user, data_dir=tmp_path)
    assert minted and second != first
    ApiToken.objects.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
    third, minted = localprofile.embedded_token(user=admin_user, data_dir=tmp_path)
    assert minted and third not in (first, second)
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 1


def test_the_profile_is_default_in_a_new_config_and_maasctl_reads_it(tmp_path: Path) -> None:
    config = tmp_path / "maasctl" / "config.toml"
    token = tmp_path / "api-token"
    token.write_text("mcp_local\n")
    assert localprofile.write_profile(url="http://127.0.0.1:18000", token_path=token,
                                      config=config) == ("default", config)  # fmt: skip
    localprofile.write_profile(url="http://127.0.0.1:18001", token_path=token, config=config)
    assert config.read_text().count("[default]") == 1  # rewritten in place
    settings = _load(config)
    assert (settings.url, settings.token, settings.profile) == (
        "http://127.0.0.1:18001", "mcp_local", "default")  # fmt: skip


def test_a_default_profile_of_the_users_is_never_touched(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    prod = tmp_path / "prod-token"
    prod.write_text("mcp_prod\n")
    mine = (f'# my profiles\n[default]\nurl = "https://cp.prod.example"\n'
            f'token_file = "{prod}"\n\n[lab]\nurl = "https://lab"\n')  # fmt: skip
    config.write_text(mine)
    token = tmp_path / "api-token"
    token.write_text("mcp_local\n")
    name, _ = localprofile.write_profile(url="http://127.0.0.1:18000", token_path=token,
                                         config=config)  # fmt: skip
    assert name == "local" and config.read_text().startswith(mine)
    localprofile.write_profile(url="http://127.0.0.1:18002", token_path=token, config=config)
    text = config.read_text()
    assert text.startswith(mine) and text.count("[local]") == 1 and "18002" in text
    assert _load(config, "local").url == "http://127.0.0.1:18002"
    assert _load(config, "default").url == "https://cp.prod.example"
    config.write_text("[default\nbroken")
    with pytest.raises(localprofile.ProfileError):
        localprofile.write_profile(url="http://x", token_path=token, config=config)
    assert config.read_text() == "[default\nbroken"


@pytest.fixture(autouse=True)
def _no_maasctl_environment(monkeypatch: Any) -> None:
    for name in ("MAASCTL_URL", "MAASCTL_TOKEN", "MAASCTL_TOKEN_FILE", "MAASCTL_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def _load(config: Path, profile: str | None = None) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAASCTL_CONFIG", str(config))
        return load(profile, prompt=False)
