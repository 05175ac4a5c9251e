"""Who may talk to the cluster: TLS on every connection, and certificates to prove it.

Anyone who reaches a Dask scheduler can run code on its workers, and a worker's result is
unpickled by whoever submitted the work: a connection is a licence to run code as the
dashboard's user. So:

- **The embedded cluster** uses TLS with a CA and certificates made in memory at start-up
  (`Security.temporary()`): only this process and the workers it spawns hold them, so no
  other account on this machine can connect to its scheduler or pose as a worker.
- **A team's cluster** uses mutual TLS: a `tls://` address, with the CA, certificate and
  key of this client in $PLNLAB_TLS_CA_FILE, $PLNLAB_TLS_CERT and $PLNLAB_TLS_KEY (or Dask's
  own `distributed.comm.tls.*` settings). `python -m core tls DIR` makes a CA and signed
  certificates for the scheduler, the workers and the clients (docs/team-cluster.md).
- A plain `tcp://` address is refused unless it is this machine's loopback, or the operator
  opts in with $PLNLAB_ALLOW_PLAINTEXT=1 (a network of its own, e.g. inside one container).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import pathlib
import socket
from urllib.parse import urlsplit

import dask
from distributed.security import Security

from core import access, config
from core.spec import SpecError

CA_ENV = "PLNLAB_TLS_CA_FILE"
CERT_ENV = "PLNLAB_TLS_CERT"
KEY_ENV = "PLNLAB_TLS_KEY"
ALLOW_PLAINTEXT_ENV = "PLNLAB_ALLOW_PLAINTEXT"
# The parties `make_certificates` signs a certificate for, each a file pair NAME.pem/NAME.key.
PARTIES = ("scheduler", "worker", "client")
VALID_DAYS = 365


def embedded():
    """Security of the embedded cluster: TLS with a throwaway CA made now, in memory."""
    return Security.temporary()


def for_address(address: str):
    """The Security to join the scheduler at `address` with, or None for a plain connection
    that is allowed (see the module docstring).

    Raises:
        SpecError: a tls:// address without a CA, certificate and key; a plain address
            beyond this machine without the opt-in; an address of another protocol.
    """
    scheme = urlsplit(address).scheme if "://" in address else "tcp"
    if scheme == "tls":
        return _team_security(address)
    if scheme not in ("tcp", "inproc"):
        raise SpecError(f"scheduler address {address!r}: use tls://HOST:PORT (or tcp:// on this machine)")
    if scheme == "tcp" and not _loopback(address) and not _opted_in():
        raise SpecError(f"refusing the plain (unencrypted, unauthenticated) scheduler address {address}: whoever "
                        f"reaches it runs code as this user. Use tls:// with {CA_ENV}, {CERT_ENV} and {KEY_ENV} "
                        f"(python -m core tls DIR makes them), or set {ALLOW_PLAINTEXT_ENV}=1 on a network of "
                        "your own")
    return None


def _team_security(address: str):
    files = {"tls_ca_file": config.raw(CA_ENV), "tls_client_cert": config.raw(CERT_ENV),
             "tls_client_key": config.raw(KEY_ENV)}
    if not any(files.values()):  # Dask's own settings (distributed.comm.tls.*), if any
        configured = {"tls_ca_file": dask.config.get("distributed.comm.tls.ca-file", None),
                      "tls_client_cert": dask.config.get("distributed.comm.tls.client.cert", None),
                      "tls_client_key": dask.config.get("distributed.comm.tls.client.key", None)}
        files = {name: value or "" for name, value in configured.items()}
    missing = [env for env, name in ((CA_ENV, "tls_ca_file"), (CERT_ENV, "tls_client_cert")) if not files[name]]
    if missing:
        raise SpecError(f"the scheduler at {address} speaks TLS: set {' and '.join(missing)} (and {KEY_ENV} unless "
                        "the key is in the certificate's file); python -m core tls DIR makes them")
    for name, path in files.items():
        if path and not os.path.isfile(path):
            raise SpecError(f"no such file: {path} ({name.replace('tls_', '').replace('_', ' ')} for {address})")
    return Security(require_encryption=True, **{name: path for name, path in files.items() if path})


def _opted_in() -> bool:
    return config.raw(ALLOW_PLAINTEXT_ENV).lower() in config.YES


def _loopback(address: str) -> bool:
    return access.loopback_only(urlsplit(address if "://" in address else "tcp://" + address).hostname)


def make_certificates(directory: str | os.PathLike, hosts: list[str] | None = None) -> dict[str, pathlib.Path]:
    """Makes a CA (ca.pem, ca.key) and, signed by it, a certificate and key for each of
    `PARTIES` (scheduler.pem/.key, ...), in `directory`, keys readable by this user alone.

    Dask checks that each side's certificate is signed by the CA, not its host name; `hosts`
    (default: this machine's name, localhost, 127.0.0.1) go into each certificate's names
    all the same, for tools that do check.

    Returns:
        The files made, by name ("ca", "ca_key", "scheduler", "scheduler_key", ...).

    Raises:
        SpecError: `directory` already holds a CA (never overwritten: certificates signed by
            it would stop working).
    """
    # Deferred: only making certificates needs cryptography's X.509 builders.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = pathlib.Path(directory)
    if (folder / "ca.pem").exists():
        raise SpecError(f"{folder / 'ca.pem'} exists: certificates signed by it would stop working; "
                        "choose another folder")
    folder.mkdir(parents=True, exist_ok=True)
    hosts = hosts or [socket.gethostname(), "localhost", "127.0.0.1"]
    now = datetime.datetime.now(datetime.timezone.utc)
    made: dict[str, pathlib.Path] = {}

    def write(name: str, certificate, key) -> None:
        cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        # Created private (0600) rather than chmod-ed after: no moment when others may read it.
        descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        made[name], made[f"{name}_key"] = cert_path, key_path

    def builder(subject: str, issuer, public_key):
        return (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                .issuer_name(issuer).public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "PLN JIT Lab cluster CA")])
    ca = (builder("PLN JIT Lab cluster CA", ca_name, ca_key.public_key())
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    write("ca", ca, ca_key)
    names = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    for party in PARTIES:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (builder(f"PLN JIT Lab {party}", ca.subject, key.public_key())
                       .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                       .add_extension(x509.SubjectAlternativeName(names), critical=False)
                       # Every party both listens and connects (a worker serves its peers too).
                       .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                             ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                       .sign(ca_key, hashes.SHA256()))
        write(party, certificate, key)
    return made
