"""The course's certificates for grading over ``tls://`` (issue 61): one CA, one certificate per machine.

    python -m grading cluster-certs --out certs lab01 lab02 10.0.0.7 instructor

writes ``certs/ca.pem`` (give it to every machine), ``certs/ca-key.pem`` (keep it on the machine that
made it: whoever holds it can admit a machine to the cluster) and, for each NAME, ``certs/NAME.pem`` and
``certs/NAME-key.pem`` (only that machine gets its key). Each certificate names its machine (DNS name, or
IP address for an address) and serves as server and client: Dask's TLS is mutual, the scheduler admits
only workers and clients whose certificate the course's CA signed, and they admit only such a
scheduler. Made with the OpenSSL command line (``openssl``, in every Linux distribution; Dask has no
command of its own for this); keys are EC P-256, certificates valid ``--days`` (default 365).

What it does not do: revoke a certificate (make a new CA and new certificates), or copy files to the
machines.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import tempfile

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-:]*$")


def _openssl(*args: str, cwd: str) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"`openssl {' '.join(args)}` failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")


def _alt_name(name: str) -> str:
    """``lab01`` -> ``DNS:lab01``; ``10.0.0.7`` -> ``IP:10.0.0.7``."""
    try:
        ipaddress.ip_address(name)
        return f"IP:{name}"
    except ValueError:
        return f"DNS:{name}"


def make(out: str, names: list[str], days: int = 365) -> list[str]:
    """Write the CA (made once: an existing ``ca.pem`` and ``ca-key.pem`` in ``out`` are reused, so machines
    can be added later) and one certificate per name; returns the paths written."""
    if shutil.which("openssl") is None:
        raise ValueError("cluster-certs needs the `openssl` command (apt-get install openssl)")
    if not names:
        raise ValueError("name at least one machine (its host name or IP address), e.g. lab01 instructor")
    bad = [n for n in names if not NAME.match(n)]
    if bad:
        raise ValueError(f"not a host name or address: {bad} (letters, digits, '.', '-', ':')")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o700)
    written = []
    ca, ca_key = os.path.join(out, "ca.pem"), os.path.join(out, "ca-key.pem")
    if not (os.path.exists(ca) and os.path.exists(ca_key)):
        _openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", str(days), "-subj", "/CN=course grading CA",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 cwd=out)
        os.chmod(ca_key, 0o600)
        written += [ca, ca_key]
    with tempfile.TemporaryDirectory(prefix="course-certs-") as tmp:
        for name in names:
            key, crt = os.path.join(out, f"{name}-key.pem"), os.path.join(out, f"{name}.pem")
            csr, ext = os.path.join(tmp, "req.csr"), os.path.join(tmp, "ext.cnf")
            with open(ext, "w") as fh:
                fh.write(f"subjectAltName={_alt_name(name)}\nbasicConstraints=CA:FALSE\n"
                         "keyUsage=critical,digitalSignature,keyAgreement\nextendedKeyUsage=serverAuth,clientAuth\n")
            _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", key, "-out", csr, "-subj", f"/CN={name}", cwd=out)
            os.chmod(key, 0o600)
            _openssl("x509", "-req", "-in", csr, "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
                     "-days", str(days), "-out", crt, "-extfile", ext, cwd=out)
            written += [crt, key]
    return written


def main(args) -> int:
    for path in make(args.out, args.names, days=args.days):
        print(path)
    print(f"give each machine {os.path.join(args.out, 'ca.pem')} and its own NAME.pem and NAME-key.pem; keep "
          f"{os.path.join(args.out, 'ca-key.pem')} here (grading/docs/scale-out.md)")
    return 0
