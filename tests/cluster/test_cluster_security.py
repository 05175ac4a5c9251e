"""Who may talk to the cluster (`core.cluster.security`): only holders of its certificates.

A real `dask scheduler` and `dask worker` with mutual TLS on 127.0.0.1 (tests/team_cluster.py)
run a fit for a client with the team's certificate, and refuse a client without one, one
with a stranger's, and a plain connection; the embedded cluster's tests are in
test_embedded_cluster.py. A worker started without the project's preload is named within
`submit.NO_WORKER_S`, not waited on for ever."""

from __future__ import annotations

import os
import socket
import ssl
import stat
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from distributed import Client
from distributed.security import Security
from specs import tutorial_spec

from core.__main__ import main as cli
from core.cli import EXIT_NO_WORKER
from core.cluster import connection, security, stored, submit
from core.spec import DatasetSpec, SpecError
from core.store.run_store import RunStore

from project import ROOT
from team_cluster import team_cluster

TINY = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="scan", iterations=10, repeats=1)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    folder = tmp_path_factory.mktemp("secure-team")
    with team_cluster(folder) as (address, _):
        yield address, folder / "tls"


def handshake_then_read(address: str, context: ssl.SSLContext) -> bytes:
    """Opens a TLS connection to `address` and reads what the server sends (Dask's scheduler
    speaks as soon as a client has connected); raises when the server refuses."""
    parts = urlsplit(address)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=parts.hostname) as tls:
            tls.sendall(b"\0" * 64)
            return tls.recv(1)


def test_a_client_with_the_teams_certificate_runs_a_fit(team, tmp_path):
    address, _ = team
    assert address.startswith("tls://127.0.0.1:")
    cluster = connection.join(address)
    try:
        cluster.client.wait_for_workers(1, timeout=120)
        result = stored.run_and_store(cluster, RunStore(tmp_path / "runs.sqlite3"), TINY)
        assert result.status == "ok" and result.worker.startswith("tls://127.0.0.1:")
    finally:
        cluster.close()


def test_a_client_without_a_certificate_is_refused_by_the_scheduler(team):
    address, certificates = team
    # It trusts the scheduler (the team's CA) but offers no certificate of its own.
    context = ssl.create_default_context(cafile=str(certificates / "ca.pem"))
    context.check_hostname = False
    with pytest.raises((ssl.SSLError, ConnectionError)):
        handshake_then_read(address, context)
    # The same probe with the team's client certificate is answered: the refusal is the certificate's.
    context.load_cert_chain(str(certificates / "client.pem"), str(certificates / "client.key"))
    assert handshake_then_read(address, context)


def test_a_client_with_a_strangers_certificate_is_refused(team, tmp_path):
    address, _ = team
    stranger = security.make_certificates(tmp_path / "stranger", ["127.0.0.1"])
    with pytest.raises((OSError, TimeoutError)):
        Client(address, timeout=5, set_as_default=False,
               security=Security(tls_ca_file=str(stranger["ca"]), tls_client_cert=str(stranger["client"]),
                                 tls_client_key=str(stranger["client_key"]), require_encryption=True))


def test_joining_a_tls_scheduler_without_certificates_is_one_line(team, monkeypatch):
    address, _ = team
    for name in (security.CA_ENV, security.CERT_ENV, security.KEY_ENV):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SpecError, match=f"speaks TLS: set {security.CA_ENV} and {security.CERT_ENV}"):
        connection.join(address)


def test_a_plain_address_beyond_this_machine_is_refused_unless_opted_in(monkeypatch):
    monkeypatch.delenv(security.ALLOW_PLAINTEXT_ENV, raising=False)
    with pytest.raises(SpecError, match="refusing the plain"):
        security.for_address("tcp://10.1.2.3:8786")
    with pytest.raises(SpecError, match="refusing the plain"):
        security.for_address("10.1.2.3:8786")  # Dask reads a bare host:port as tcp://
    assert security.for_address("tcp://127.0.0.1:8786") is None  # this machine's loopback
    assert security.for_address("tcp://localhost:8786") is None
    with pytest.raises(SpecError, match="use tls://"):
        security.for_address("ws://10.1.2.3:8786")
    monkeypatch.setenv(security.ALLOW_PLAINTEXT_ENV, "1")
    assert security.for_address("tcp://10.1.2.3:8786") is None


def test_a_tls_address_with_a_missing_file_names_it(monkeypatch, tmp_path):
    monkeypatch.setenv(security.CA_ENV, str(tmp_path / "nope.pem"))
    monkeypatch.setenv(security.CERT_ENV, str(tmp_path / "client.pem"))
    with pytest.raises(SpecError, match="no such file: .*nope.pem"):
        security.for_address("tls://10.1.2.3:8786")


def test_the_command_line_makes_certificates_with_private_keys_and_never_replaces_a_ca(tmp_path):
    folder = tmp_path / "certs"
    done = subprocess.run([sys.executable, "-m", "core", "tls", str(folder), "--host", "scheduler.example"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "dask scheduler --protocol tls" in done.stdout and security.CERT_ENV in done.stdout
    for party in ("ca", *security.PARTIES):
        assert (folder / f"{party}.pem").exists()
        assert stat.S_IMODE(os.stat(folder / f"{party}.key").st_mode) == 0o600
    again = subprocess.run([sys.executable, "-m", "core", "tls", str(folder)], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "ca.pem exists" in again.stderr


def test_a_worker_without_the_projects_preload_is_named_not_waited_on(tmp_path, monkeypatch, capsys):
    """A colleague's worker started by hand without `--preload core.cluster.worker_setup` offers
    none of our resources: the command line says so, and how to start one, and exits 4."""
    monkeypatch.setattr(submit, "NO_WORKER_S", 3.0)
    with team_cluster(tmp_path, preload=False) as (address, _):
        probe = connection.join(address)
        try:
            probe.client.wait_for_workers(1, timeout=120)  # a worker is there: just not one of ours
        finally:
            probe.close()
        code = cli(["run", "--scheduler", address, "--dataset", "simulated", "--n", "40", "--p", "5",
                    "--iterations", "10", "--repeats", "1", "--db", str(tmp_path / "runs.sqlite3")])
    err = capsys.readouterr().err
    assert code == EXIT_NO_WORKER, err
    last = err.strip().splitlines()[-1]
    assert "no worker of this project serves cpu" in last and "its 1 worker offer no cpu" in last
    assert "--preload core.cluster.worker_setup" in last
    assert RunStore(tmp_path / "runs.sqlite3").in_flight() == []  # its note is gone with it
