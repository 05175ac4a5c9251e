"""The security review's probes, run against this tree, with the figures they give.

Prints one block per probe and exits 1 when a probe gets through:

- **cluster**: a real `dask scheduler` and `dask worker` with mutual TLS on 127.0.0.1; a
  client with the team's certificate runs a fit, and a client with no certificate, one with a
  stranger's and a plain `tcp://` one are each refused (how, and how long it took);
- **uploads**: a served dashboard with a password; a script opens a session over Streamlit's
  websocket and PUTs `--upload-mib` MiB files to the upload endpoint before signing in
  (answers, and the server's RSS before and after);
- **imports**: the decompression bombs (a Parquet footer declaring 2,000,000 rows; 5,000
  rows sharing one 2 MB dictionary value) imported into a store (answer, this process's
  RSS growth, seconds);
- **throttle**: a fresh session every 50 ms for 10 simulated minutes from one address after a
  spread attack has put the server "under attack", and a colleague at another address
  signing in every 5 s (a typo first once a minute): the colleague's longest wait, and how
  many guesses the flood got checked.

    .venv/bin/python benchmarks/security_probes.py
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import pathlib
import ssl
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE.parent / "tests" / "app")]

import psutil  # noqa: E402

MiB = 2**20


def _rss_mb(pid: int | None = None) -> float:
    return psutil.Process(pid or os.getpid()).memory_info().rss / MiB


def probe_cluster(folder: pathlib.Path) -> bool:
    from distributed import Client
    from distributed.security import Security

    from core.cluster import connection, security, stored
    from core.spec import DatasetSpec, FitSpec
    from core.store.run_store import RunStore

    from team_cluster import team_cluster

    print("cluster (mutual TLS, a real scheduler and worker on 127.0.0.1):")
    held = True
    with team_cluster(folder) as (address, _):
        cluster = connection.join(address)
        try:
            cluster.client.wait_for_workers(1, timeout=120)
            spec = FitSpec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="scan", iterations=10, repeats=1)
            result = stored.run_and_store(cluster, RunStore(folder / "runs.sqlite3"), spec)
            print(f"  the team's client: fit {result.status} on {result.worker}")
        finally:
            cluster.close()
        stranger = security.make_certificates(folder / "stranger", ["127.0.0.1"])
        attempts = {
            "no certificate (TLS, trusting the team's CA)": None,
            "a stranger's CA and certificate": Security(
                tls_ca_file=str(stranger["ca"]), tls_client_cert=str(stranger["client"]),
                tls_client_key=str(stranger["client_key"]), require_encryption=True),
        }
        for label, credentials in attempts.items():
            started = time.perf_counter()
            try:
                if credentials is None:
                    _bare_tls(address, folder / "tls" / "ca.pem")
                else:
                    Client(address, timeout=5, set_as_default=False, security=credentials).close()
                print(f"  {label}: ACCEPTED")
                held = False
            except Exception as refused:  # noqa: BLE001 - how it was refused is the figure
                print(f"  {label}: refused ({type(refused).__name__}: {str(refused)[:90]}) "
                      f"in {time.perf_counter() - started:.2f} s")
        plain = address.replace("tls://", "tcp://")
        started = time.perf_counter()
        try:
            Client(plain, timeout=5, set_as_default=False).close()
            print("  plain tcp:// to the TLS port: ACCEPTED")
            held = False
        except Exception as refused:  # noqa: BLE001
            print(f"  plain tcp:// to the TLS port: refused ({type(refused).__name__}) "
                  f"in {time.perf_counter() - started:.2f} s")
    return held


def _bare_tls(address: str, ca: pathlib.Path) -> None:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address)
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=parts.hostname) as tls:
            tls.sendall(b"\0" * 64)
            if not tls.recv(1):
                raise ConnectionError("closed by the scheduler")


def probe_uploads(folder: pathlib.Path, files: int, mib: int) -> bool:
    from served_app import served_app
    from stream_client import open_session, put_file

    print(f"uploads ({files} x {mib} MiB PUT before sign-in, a password-protected served dashboard):")
    with served_app({"PLNLAB_PASSWORD": "s3cret", "PLNLAB_DB": str(folder / "uploads.sqlite3")}) as (base, process):
        async def probe():
            async with open_session(base) as session:
                before = _rss_mb(process.pid)
                started = time.perf_counter()
                answers = [put_file(base, session, f"f{index}", b"1," * (mib * MiB // 2)) for index in range(files)]
                return answers, before, _rss_mb(process.pid), time.perf_counter() - started

        answers, before, after, seconds = asyncio.run(probe())
    print(f"  answers {sorted(set(answers))} ({answers.count(403)} of {files} refused) in {seconds:.1f} s; "
          f"server RSS {before:.0f} -> {after:.0f} MB ({after - before:+.0f} MB for {files * mib} MiB sent)")
    return set(answers) == {403}


def probe_imports(folder: pathlib.Path) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.store.run_store import RunStore, StoreError

    def parquet(table) -> bytes:
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        return sink.getvalue()

    bombs = {
        "2,000,000 declared rows": parquet(pa.table({"dataset": pa.array(["oaks x1"] * 2_000_000)})),
        "5,000 rows sharing one 2 MB value": parquet(pa.table({"error": pa.DictionaryArray.from_arrays(
            pa.array([0] * 5_000, pa.int32()), pa.array(["x" * 2_000_000]))})),
    }
    print("imports (Parquet decompression bombs):")
    held = True
    store = RunStore(folder / "imports.sqlite3")
    for label, data in bombs.items():
        before, started = _rss_mb(), time.perf_counter()
        try:
            store.import_bytes(data, "bomb.parquet")
            print(f"  {label}: IMPORTED")
            held = False
        except StoreError as refused:
            print(f"  {label} ({len(data) / 1024:.1f} KB): refused in {time.perf_counter() - started:.3f} s, "
                  f"RSS {_rss_mb() - before:+.1f} MB: {refused}")
    return held


def probe_throttle() -> bool:
    from core import access

    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    throttle = access.Throttle(clock)
    for spread in range(access.GLOBAL_FREE_GUESSES):
        throttle.check(f"spread{spread}", "guess", "s3cret", f"198.51.100.{spread % 250}")
    started, delays, flood_checked = clock.now, [], 0
    for tick in range(int(600 / 0.05)):
        clock.now = started + tick * 0.05
        flood_checked += throttle.wait_s(f"flood{tick}", "203.0.113.9") == 0
        throttle.check(f"flood{tick}", "guess", "s3cret", "203.0.113.9")
        if tick % 100 == 0:
            colleague = f"colleague{tick}"
            if tick % 1200 == 0:
                throttle.check(colleague, "typo", "s3cret", "10.0.0.9")
            delays.append(throttle.wait_s(colleague, "10.0.0.9"))
            throttle.check(colleague, "s3cret", "s3cret", "10.0.0.9")
    print("throttle (10 simulated minutes, a fresh session every 50 ms from one address):")
    print(f"  the flood's guesses checked: {flood_checked} of 12,000; a colleague at another address, "
          f"{len(delays)} sign-ins: longest wait {max(delays):.1f} s")
    return max(delays) == 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upload-files", type=int, default=6)
    parser.add_argument("--upload-mib", type=int, default=46)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plnlab-probes-") as folder:
        path = pathlib.Path(folder)
        held = [probe_throttle(), probe_imports(path), probe_uploads(path, args.upload_files, args.upload_mib),
                probe_cluster(path)]
    print("every probe refused" if all(held) else "A PROBE GOT THROUGH")
    return 0 if all(held) else 1


if __name__ == "__main__":
    sys.exit(main())
