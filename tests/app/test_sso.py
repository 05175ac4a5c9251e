"""Sign-in with the team's SSO: with an [auth] section in the secrets, every page waits for
`st.login`, the signed-in user's runs are theirs (owned by their identity, whatever the
session), and signing out ends it. A real OpenID Connect provider runs on 127.0.0.1 (the
oidc-provider-mock package: discovery, keys, tokens, an authorization form), and a real
browser signs in through it."""

from __future__ import annotations

import re
import secrets

import pytest

from core.store.run_store import RunStore

from served_app import free_port, launch_browser, require_chromium, served_app, wait_painted

pytestmark = pytest.mark.browser

sync_api = require_chromium()
oidc_provider_mock = pytest.importorskip("oidc_provider_mock")


def test_a_team_signs_in_with_its_sso_and_owns_its_runs(tmp_path):
    claims = {"email": "alice@example.org", "email_verified": True, "name": "Alice"}
    with oidc_provider_mock.run_server_in_thread(
            user_claims=[oidc_provider_mock.User(sub="alice", claims=claims)]) as provider:
        port = free_port()
        secrets_file = tmp_path / "secrets.toml"
        secrets_file.write_text(
            "[auth]\n"
            f'redirect_uri = "http://localhost:{port}/oauth2callback"\n'
            f'cookie_secret = "{secrets.token_hex(32)}"\n'
            'client_id = "plnlab"\nclient_secret = "not-a-secret"\n'
            f'server_metadata_url = "http://localhost:{provider.server_port}/.well-known/openid-configuration"\n')
        env = {"PLNLAB_DB": str(tmp_path / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(tmp_path / "jax")}
        with served_app(env, port=port, log_path=str(tmp_path / "server.log"),
                        options=("--secrets.files", str(secrets_file))):
            base = f"http://localhost:{port}"
            with sync_api.sync_playwright() as playwright:
                browser = launch_browser(playwright)
                page = browser.new_page(viewport={"width": 1024, "height": 768})
                page.goto(base)
                wait_painted(page, 120_000)
                page.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
                assert not page.get_by_role("button", name=re.compile("^Run ")).count()  # nothing before sign-in
                page.get_by_role("button", name="Sign in").click()
                page.get_by_role("button", name="alice").click()  # the provider's form: a known user
                page.wait_for_url(re.compile(rf"^{re.escape(base)}"), timeout=60_000)
                wait_painted(page, 180_000)
                # Shown as text, never a mail link: a word joiner follows the @.
                page.get_by_text(re.compile(r"alice@\u2060?example\.org")).wait_for(timeout=60_000)
                # A run made now is Alice's, in the store, whatever session made it.
                page.get_by_text("simulated", exact=True).click()
                wait_painted(page, 120_000)
                for name, value in (("Iterations", "5"), ("Repeats", "1")):
                    box = page.get_by_role("spinbutton", name=name)
                    box.fill(value)
                    box.press("Enter")
                    wait_painted(page, 120_000)
                page.get_by_role("button", name=re.compile(r"^Run \d+ strateg")).click()
                page.get_by_role("button", name="Run again").wait_for(timeout=600_000)
                runs = RunStore(env["PLNLAB_DB"]).list()
                # Owned by the provider's issuer and subject, never by the e-mail claim.
                owners = {run.owner for run in runs}
                assert runs and len(owners) == 1 and re.fullmatch(
                    rf"user:http://localhost:{provider.server_port}/? alice", owners.pop())
                page.get_by_role("button", name="Sign out").click()
                page.get_by_role("button", name="End session").click()  # the provider asks to confirm
                page.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
                browser.close()
