"""What `mnemo team serve` decides before it starts anything: when the token (and nginx) is required, where the
token comes from, and the nginx config it generates. The real servers are in tests/integration/test_team_auth.py."""

from __future__ import annotations

import stat

import pytest

from mnemo.core.errors import InvalidInput, MnemoError
from mnemo.core.team.address import TeamSettings, load_settings, save_settings
from mnemo.core.team.server import TOKEN_FILE, is_loopback, nginx_conf, plan_serve

NGINX = "/usr/sbin/nginx"  # plan_serve only needs to know one exists; nothing is run here
TOKEN = "a" * 40


@pytest.mark.parametrize("host,loop", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                       ("127.0.0.2", True), ("0.0.0.0", False), ("::", False),
                                       ("10.1.2.3", False), ("team.example.com", False)])
def test_is_loopback(host, loop):
    assert is_loopback(host) is loop


def test_loopback_without_a_token_stays_tokenless(tmp_path):
    plan = plan_serve(tmp_path / "d", "127.0.0.1", 8765, nginx=None)
    assert not plan.proxied and plan.token is None and plan.token_how == "none"
    assert not (tmp_path / "d" / TOKEN_FILE).exists()


def test_beyond_loopback_generates_a_private_token_once(tmp_path):
    data = tmp_path / "d"
    plan = plan_serve(data, "0.0.0.0", 8765, nginx=NGINX)
    assert plan.proxied and plan.token_how == "generated" and len(plan.token) == 64
    assert plan.internal_port and plan.internal_port != 8765
    assert stat.S_IMODE((data / TOKEN_FILE).stat().st_mode) == 0o600
    again = plan_serve(data, "0.0.0.0", 8765, nginx=NGINX)
    assert (again.token, again.token_how) == (plan.token, "saved")
    # Once a token exists, loopback serving keeps checking it.
    assert plan_serve(data, "127.0.0.1", 8765, nginx=NGINX).token == plan.token


def test_beyond_loopback_without_nginx_refuses_and_writes_nothing(tmp_path):
    data = tmp_path / "d"
    with pytest.raises(MnemoError) as err:
        plan_serve(data, "0.0.0.0", 8765, nginx=None)
    assert "nginx" in err.value.message and "apt-get install -y nginx" in err.value.hint
    assert not data.exists()
    with pytest.raises(MnemoError):  # a token on loopback is also enforced, or refused
        plan_serve(data, "127.0.0.1", 8765, token=TOKEN, nginx=None)


@pytest.mark.parametrize("bad", ["short", "A" * 40, "a" * 20 + " " + "a" * 20, "a" * 39 + '"', "a" * 39 + "$", "x" * 300])
def test_a_weak_or_unsafe_token_is_refused(tmp_path, bad):
    with pytest.raises(InvalidInput) as err:
        plan_serve(tmp_path / "d", "0.0.0.0", 8765, token=bad, nginx=NGINX)
    assert "openssl rand -hex 32" in err.value.hint


def test_tls_needs_both_files(tmp_path):
    cert = tmp_path / "c.pem"
    cert.write_text("x")
    with pytest.raises(InvalidInput, match="both"):
        plan_serve(tmp_path / "d", "0.0.0.0", 8765, tls_cert=cert, nginx=NGINX)
    with pytest.raises(InvalidInput, match="not a readable file"):
        plan_serve(tmp_path / "d", "0.0.0.0", 8765, tls_cert=cert, tls_key=tmp_path / "nope", nginx=NGINX)


def test_nginx_config_checks_both_token_headers_and_serves_tls(tmp_path):
    (tmp_path / "c.pem").write_text("x")
    (tmp_path / "k.pem").write_text("x")
    plan = plan_serve(tmp_path / "d", "::", 9000, token=TOKEN, tls_cert=tmp_path / "c.pem",
                      tls_key=tmp_path / "k.pem", nginx=NGINX)
    conf = nginx_conf(plan)
    assert f'"Bearer {TOKEN}" 1;' in conf and f'"{TOKEN}" 1;' in conf
    assert "listen [::]:9000 ssl;" in conf and f"ssl_certificate {tmp_path / 'c.pem'};" in conf
    assert f"proxy_pass http://127.0.0.1:{plan.internal_port};" in conf
    assert 'proxy_set_header Authorization "";' in conf  # the token goes no further than the proxy
    assert "/etc/nginx" not in conf and plan.url().startswith("https://")


def test_client_settings_keep_a_ca_certificate_for_https_only(tmp_path, monkeypatch):
    for var in ("MNEMO_TEAM_URL", "MNEMO_TEAM_TOKEN", "MNEMO_TEAM_NAMESPACE", "MNEMO_TEAM_CA"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(InvalidInput, match="https"):
        save_settings(tmp_path, "http://team:8765", TOKEN, "default", str(tmp_path / "ca.pem"))
    with pytest.raises(InvalidInput, match="cannot load"):
        save_settings(tmp_path, "https://team:8765", TOKEN, "default", str(tmp_path / "missing.pem"))
    assert not (tmp_path / "team.json").exists()  # refused: nothing saved
    assert TeamSettings("https://team:8765").verify() is True  # no CA given: the default bundle
    monkeypatch.setenv("MNEMO_TEAM_URL", "https://team:8765")
    monkeypatch.setenv("MNEMO_TEAM_CA", "/etc/team-ca.pem")
    s = load_settings(tmp_path)
    assert s.ca_cert == "/etc/team-ca.pem" and s.public()["ca_cert"] == "/etc/team-ca.pem"
