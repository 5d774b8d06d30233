"""Certificates for the TLS tests, made with the openssl command line into a directory.

Nothing here is committed: every key is generated when the tests run. make_pki(dir) returns
a dict of paths:

  ca, ca_key          the test CA (self-signed)
  server, server_key  CN=localhost, subjectAltName localhost and 127.0.0.1, RSA (so that
                      DHE-RSA and ECDHE-RSA suites can be chosen), signed by the CA
  server2, server2_key  another server certificate of the same CA (for reload tests)
  alice, alice_key    client certificate CN=alice,O=Arbor,C=GB
  bob, bob_key        client certificate CN=bob
  expired, expired_key    CN=expired, valid only in 2020
  revoked, revoked_key    CN=revoked, revoked in the CRL
  crl                 the CA's CRL (revoked is on it)
  other_ca            a second CA; stranger, stranger_key: CN=stranger, issued by it
  capath              a directory holding the CA hashed as `openssl rehash` does
  dhparam             RFC 7919 ffdhe3072 DH parameters

make_peer_pki(dir, n) makes the certificates of MQTT-ST peer links over TLS:

  peer_ca             the CA of the brokers (peer_cafile, and the cafile of peer listeners)
  peer0 .. peer<n-1>, peer<i>_key   CN=b<i>, subjectAltName localhost and 127.0.0.1,
                      extendedKeyUsage serverAuth and clientAuth (a peer is both), peer CA
  elsewhere, elsewhere_key   a peer CA certificate naming only elsewhere.example, 192.0.2.1
  rogue, rogue_key    shaped like a peer's, issued by another CA (rogue_ca)
  client_ca           a CA of ordinary clients; client, client_key: CN=mallory, issued by it
  listener_ca         peer_ca and client_ca in one file (a listener for peers and clients)
  peer_capath         a directory holding peer_ca hashed as `openssl rehash` does

make_ocsp_pki(dir) makes what a remote staples for bridge_require_ocsp (openssl ocsp, signed
by the CA itself, valid for a day):

  ca                  the CA (bridge_cafile)
  server, server_key  CN=localhost, subjectAltName localhost and 127.0.0.1, good
  revoked, revoked_key  the same names, revoked in the CA's database
  good_response       DER: server is good
  revoked_response    DER: revoked is revoked
  unknown_response    DER: server has the status unknown (an empty database)
  forged_response     DER: server is good, signed by another CA (forger)

When the suite runs as root the broker drops privileges (to nobody) before a SIGHUP reads
the files again, so the directory and the keys are made readable by everyone (test keys).
"""

import contextlib
import os
import shutil
import subprocess
import tempfile

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"

CA_CONF = """
[ ca ]
default_ca = test_ca

[ test_ca ]
dir = {dir}
database = {dir}/index.txt
serial = {dir}/serial
crlnumber = {dir}/crlnumber
new_certs_dir = {dir}/issued
default_md = sha256
default_days = 30
default_crl_days = 30
policy = any_name
unique_subject = no
copy_extensions = copy
x509_extensions = client_ext

[ any_name ]
commonName = supplied
organizationName = optional
countryName = optional

[ client_ext ]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = clientAuth

[ server_ext ]
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1

[ peer_ext ]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost, IP:127.0.0.1

[ peer_elsewhere_ext ]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:elsewhere.example, IP:192.0.2.1
"""


def _readable_by_all(directory):
    for root, dirs, files in os.walk(directory):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)


@contextlib.contextmanager
def temporary(make, prefix):
    """make(dir)'s dict of paths (make_pki, make_ocsp_pki), made in a new directory that the
    broker can still read after dropping privileges, removed afterwards."""
    top = tempfile.mkdtemp(prefix=prefix)
    os.chmod(top, 0o755)
    try:
        yield make(os.path.join(top, "pki"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


def openssl(*args, cwd=None):
    r = subprocess.run([OPENSSL] + list(args), cwd=cwd, capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed:\n%s%s" % (" ".join(args), r.stdout, r.stderr))
    return r.stdout


def _ca(directory, name):
    """A CA in directory/name with an `openssl ca` database; returns (dir, cert, conf)."""
    d = os.path.join(directory, name)
    os.makedirs(os.path.join(d, "issued"))
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("1000\n")
    with open(os.path.join(d, "crlnumber"), "w") as f:
        f.write("01\n")
    conf = os.path.join(d, "ca.cnf")
    with open(conf, "w") as f:
        f.write(CA_CONF.format(dir=d))
    cert = os.path.join(directory, name + ".crt")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", os.path.join(d, "ca.key"), "-out", cert, "-days", "30",
            "-subj", "/CN=arbor test %s" % name)
    return d, cert, conf


def _issue(directory, ca, name, subject, ext="client_ext", rsa=False, dates=None):
    """A key and a certificate for subject, issued by ca; returns (cert, key)."""
    ca_dir, ca_cert, conf = ca
    key = os.path.join(directory, name + ".key")
    csr = os.path.join(ca_dir, name + ".csr")
    cert = os.path.join(directory, name + ".crt")
    keyopts = (["-newkey", "rsa:2048"] if rsa else
               ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
    openssl("req", *keyopts, "-nodes", "-keyout", key, "-out", csr, "-subj", subject)
    period = (["-startdate", dates[0], "-enddate", dates[1]] if dates else [])
    openssl("ca", "-batch", "-config", conf, "-cert", ca_cert, "-keyfile",
            os.path.join(ca_dir, "ca.key"), "-extensions", ext, "-in", csr, "-out", cert,
            "-notext", "-preserveDN", *period)
    return cert, key


def serial_of(cert_path=None, pem=None):
    """The certificate's serial number as openssl prints it (hex, upper case)."""
    args = ["x509", "-noout", "-serial"]
    if cert_path:
        out = openssl(*args, "-in", cert_path)
    else:
        r = subprocess.run([OPENSSL] + args, input=pem, capture_output=True, text=True,
                           timeout=20)
        out = r.stdout
    return out.strip().split("=", 1)[1]


def subject_of(cert_path):
    """The certificate's subject as RFC 2253 writes it (last RDN first)."""
    out = openssl("x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in", cert_path)
    return out.strip().split("=", 1)[1]


def make_pki(directory):
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    p = {}
    ca = _ca(directory, "ca")
    p["ca"] = ca[1]
    p["ca_key"] = os.path.join(ca[0], "ca.key")
    p["server"], p["server_key"] = _issue(directory, ca, "server", "/CN=localhost",
                                          ext="server_ext", rsa=True)
    p["server2"], p["server2_key"] = _issue(directory, ca, "server2", "/CN=localhost",
                                            ext="server_ext", rsa=True)
    p["alice"], p["alice_key"] = _issue(directory, ca, "alice", "/C=GB/O=Arbor/CN=alice")
    p["bob"], p["bob_key"] = _issue(directory, ca, "bob", "/CN=bob")
    p["expired"], p["expired_key"] = _issue(directory, ca, "expired", "/CN=expired",
                                            dates=("20200101000000Z", "20200201000000Z"))
    p["revoked"], p["revoked_key"] = _issue(directory, ca, "revoked", "/CN=revoked")
    ca_dir, ca_cert, conf = ca
    keyfile = os.path.join(ca_dir, "ca.key")
    openssl("ca", "-batch", "-config", conf, "-cert", ca_cert, "-keyfile", keyfile,
            "-revoke", p["revoked"])
    p["crl"] = os.path.join(directory, "ca.crl")
    openssl("ca", "-batch", "-config", conf, "-cert", ca_cert, "-keyfile", keyfile,
            "-gencrl", "-out", p["crl"])
    other = _ca(directory, "other_ca")
    p["other_ca"] = other[1]
    p["stranger"], p["stranger_key"] = _issue(directory, other, "stranger", "/CN=stranger")
    p["capath"] = os.path.join(directory, "capath")
    os.makedirs(p["capath"])
    shutil.copy(p["ca"], os.path.join(p["capath"], "ca.pem"))
    openssl("rehash", p["capath"])
    p["dhparam"] = os.path.join(directory, "dhparam.pem")
    openssl("genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe3072",
            "-out", p["dhparam"])
    _readable_by_all(directory)
    return p


def make_peer_pki(directory, n):
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    p = {}
    peer_ca = _ca(directory, "peer_ca")
    p["peer_ca"] = peer_ca[1]
    for i in range(n):
        p["peer%d" % i], p["peer%d_key" % i] = _issue(directory, peer_ca, "peer%d" % i,
                                                      "/CN=b%d" % i, ext="peer_ext")
    p["elsewhere"], p["elsewhere_key"] = _issue(directory, peer_ca, "elsewhere", "/CN=elsewhere",
                                                ext="peer_elsewhere_ext")
    rogue_ca = _ca(directory, "rogue_ca")
    p["rogue_ca"] = rogue_ca[1]
    p["rogue"], p["rogue_key"] = _issue(directory, rogue_ca, "rogue", "/CN=rogue", ext="peer_ext")
    client_ca = _ca(directory, "client_ca")
    p["client_ca"] = client_ca[1]
    p["client"], p["client_key"] = _issue(directory, client_ca, "client", "/CN=mallory")
    p["listener_ca"] = os.path.join(directory, "listener_ca.crt")
    with open(p["listener_ca"], "w") as out:
        for name in ("peer_ca", "client_ca"):
            with open(p[name]) as f:
                out.write(f.read())
    p["peer_capath"] = os.path.join(directory, "peer_capath")
    os.makedirs(p["peer_capath"])
    shutil.copy(p["peer_ca"], os.path.join(p["peer_capath"], "peer_ca.pem"))
    openssl("rehash", p["peer_capath"])
    _readable_by_all(directory)
    return p


def _ocsp_response(directory, ca, name, cert, index, signer=None):
    """A DER OCSP response about cert from index, signed by signer (cert, key; default the
    CA); returns its path."""
    ca_dir, ca_cert, conf = ca
    signer_cert, signer_key = signer or (ca_cert, os.path.join(ca_dir, "ca.key"))
    request = os.path.join(ca_dir, name + ".req")
    openssl("ocsp", "-issuer", ca_cert, "-cert", cert, "-no_nonce", "-reqout", request)
    out = os.path.join(directory, name + ".der")
    openssl("ocsp", "-index", index, "-CA", ca_cert, "-rsigner", signer_cert, "-rkey",
            signer_key, "-reqin", request, "-respout", out, "-ndays", "1")
    return out


def make_ocsp_pki(directory):
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    p = {}
    ca = _ca(directory, "ocsp_ca")
    ca_dir, ca_cert, conf = ca
    p["ca"] = ca_cert
    p["server"], p["server_key"] = _issue(directory, ca, "ocsp_good", "/CN=localhost",
                                          ext="server_ext")
    p["revoked"], p["revoked_key"] = _issue(directory, ca, "ocsp_revoked", "/CN=localhost",
                                            ext="server_ext")
    openssl("ca", "-batch", "-config", conf, "-cert", ca_cert, "-keyfile",
            os.path.join(ca_dir, "ca.key"), "-revoke", p["revoked"])
    index = os.path.join(ca_dir, "index.txt")
    empty = os.path.join(ca_dir, "empty_index.txt")
    open(empty, "w").close()
    p["good_response"] = _ocsp_response(directory, ca, "good", p["server"], index)
    p["revoked_response"] = _ocsp_response(directory, ca, "revoked", p["revoked"], index)
    p["unknown_response"] = _ocsp_response(directory, ca, "unknown", p["server"], empty)
    forger_dir, forger_cert, _ = _ca(directory, "forger")
    p["forged_response"] = _ocsp_response(directory, ca, "forged", p["server"], index,
                                          (forger_cert, os.path.join(forger_dir, "ca.key")))
    _readable_by_all(directory)
    return p
