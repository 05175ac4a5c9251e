"""The command that sets a team's cluster up: `tls` makes its CA and certificates
(`core.cluster.security.make_certificates`) and prints how each party uses them."""

from __future__ import annotations

from core.cli import EXIT_OK


def command_tls(args) -> int:
    from core.cluster import security

    made = security.make_certificates(args.folder, args.host)
    folder = made["ca"].parent.resolve()
    print(f"made a CA and certificates for {', '.join(security.PARTIES)} in {folder}")
    print(f"keep {folder / 'ca.key'} away from the cluster: whoever holds it can make certificates the cluster trusts")
    tls = f"--tls-ca-file {folder / 'ca.pem'}"
    print(f"scheduler: dask scheduler --protocol tls --port 8786 {tls} --tls-cert {folder / 'scheduler.pem'} "
          f"--tls-key {folder / 'scheduler.key'}")
    print(f"workers:   dask worker tls://SCHEDULER-HOST:8786 --nthreads 1 --preload core.cluster.worker_setup {tls} "
          f"--tls-cert {folder / 'worker.pem'} --tls-key {folder / 'worker.key'}")
    print(f"dashboard and command line: {security.CA_ENV}={folder / 'ca.pem'} "
          f"{security.CERT_ENV}={folder / 'client.pem'} {security.KEY_ENV}={folder / 'client.key'} "
          "PLNLAB_SCHEDULER=tls://SCHEDULER-HOST:8786")
    return EXIT_OK
