"""Shared pieces of the TLS tests: a test CA with server and client certificates (made with ``cryptography``
at test time), and a real name server + broker serving TLS over loopback."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from rmq.acl import AccessValidator
from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.client import ClientConfig
from rmq.namesrv.server import NameServer
from rmq.remoting.tls import TlsServerSettings


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_ca: Path  # a CA nobody here trusts
    rogue_cert: Path  # a client certificate it signed
    rogue_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return path


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(root: Path) -> Pki:
    root.mkdir(parents=True, exist_ok=True)
    ca_key, rogue_key = _key(), _key()
    ca = _cert("rmq test CA", ca_key, None, ca_key, ca=True)
    rogue = _cert("rogue CA", rogue_key, None, rogue_key, ca=True)
    server_key, client_key, rogue_client_key = _key(), _key(), _key()
    server = _cert("broker", server_key, ca.subject, ca_key, ca=False)
    client = _cert("client", client_key, ca.subject, ca_key, ca=False)
    rogue_client = _cert("intruder", rogue_client_key, rogue.subject, rogue_key, ca=False)
    return Pki(
        ca=_write_cert(root / "ca.pem", ca),
        server_cert=_write_cert(root / "server.pem", server),
        server_key=_write_key(root / "server.key", server_key),
        client_cert=_write_cert(root / "client.pem", client),
        client_key=_write_key(root / "client.key", client_key),
        rogue_ca=_write_cert(root / "rogue-ca.pem", rogue),
        rogue_cert=_write_cert(root / "rogue.pem", rogue_client),
        rogue_key=_write_key(root / "rogue.key", rogue_client_key),
    )


def server_props(pki: Pki, mode: str, need_client_auth: str = "none") -> dict[str, str]:
    """Broker properties for TLS ``mode``; the broker registers with its name server over TLS."""
    return {
        "tls.server.mode": mode,
        "tls.server.certPath": str(pki.server_cert),
        "tls.server.keyPath": str(pki.server_key),
        "tls.server.trustCertPath": str(pki.ca),
        "tls.server.need.client.auth": need_client_auth,
        "tls.enable": "true" if mode != "disabled" else "false",
        "tls.client.trustCertPath": str(pki.ca),
        "tls.client.authServer": "true",
        "tls.client.certPath": str(pki.client_cert),
        "tls.client.keyPath": str(pki.client_key),
    }


@dataclass
class TlsCluster:
    ctl: BrokerController
    ns: NameServer
    pki: Pki

    @property
    def addr(self) -> str:
        return self.ctl.config.broker_addr

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns.port}"

    def client_config(self, instance: str, *, tls: bool, cert: bool = False, **kw: object) -> ClientConfig:
        cfg = ClientConfig(namesrv_addr=self.namesrv, instance_name=instance, tls=tls)
        if tls:
            cfg.tls_ca = str(self.pki.ca)
            if cert:
                cfg.tls_cert, cfg.tls_key = str(self.pki.client_cert), str(self.pki.client_key)
        for k, v in kw.items():
            setattr(cfg, k, v)
        return cfg

    def written(self) -> int:
        store = self.ctl.store
        assert store is not None
        return store.commitlog_max_offset()


async def start_cluster(
    tmp_path: Path,
    mode: str,
    need_client_auth: str = "none",
    network_thread: bool = True,
    extra: dict[str, str] | None = None,
    acl: AccessValidator | None = None,
    pki: Pki | None = None,
) -> TlsCluster:
    """Name server and broker with TLS ``mode``; ``extra``: more broker properties; ``acl``: the name
    server's rules (give the broker the same file with ``aclEnable`` in ``extra``)."""
    pki = pki or make_pki(tmp_path / "pki")
    props = server_props(pki, mode, need_client_auth)
    props.update(extra or {})
    cfg = BrokerConfig()
    cfg.update({"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1"})
    ns = NameServer(tls=cfg_tls(props), acl=acl)
    await ns.start("127.0.0.1", 0)
    props["namesrvAddr"] = f"127.0.0.1:{ns.port}"
    cfg.update(props)
    cfg.network_thread = network_thread
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    return TlsCluster(ctl, ns, pki)


def cfg_tls(props: dict[str, str]) -> TlsServerSettings:  # the name server takes the broker's
    cfg = BrokerConfig()
    cfg.update({k: v for k, v in props.items() if k.startswith("tls.")})
    return cfg.tls_server()


async def stop_cluster(c: TlsCluster) -> None:
    await c.ctl.shutdown()
    await c.ns.stop()
