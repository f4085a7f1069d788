//! TLS on the network thread's connections (rustls with the ring provider), as RocketMQ's
//! `tls.server.*` properties describe it.
//!
//! Takes: `permissive` (a connection whose first byte is a TLS handshake record, 0x16, gets a
//! TLS session; any other is served in plain text) and `enforcing` (a non-TLS first byte closes
//! the connection), a PEM certificate chain and key, and client certificates `none`, `optional`
//! or `require`d against a PEM CA bundle. Declines: encrypted private keys (the broker serves
//! those from the asyncio server instead).
//!
//! A session lives beside its connection's output buffer, under the same lock: every write
//! (the owner's, fast-path answers) is encrypted there, in order, and leaves as ciphertext.

use std::fmt;
use std::io::{Read, Write};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

/// The record type that opens a TLS handshake (a ClientHello's first byte).
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// What a connection that does not start with a TLS handshake gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Served in plain text.
    Permissive,
    /// Refused (closed).
    Enforcing,
}

/// Whether clients must present a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// A certificate, when sent, must verify.
    Optional,
    Require,
}

/// The server side of TLS: mode and rustls configuration, shared by every connection.
#[derive(Clone)]
pub struct TlsServer {
    pub mode: TlsMode,
    config: Arc<ServerConfig>,
}

impl fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServer")
            .field("mode", &self.mode)
            .finish()
    }
}

impl TlsServer {
    /// Load the certificate chain, key and (for client authentication) trusted CAs; the error
    /// names the file that failed.
    pub fn load(
        mode: TlsMode,
        cert_path: &str,
        key_path: &str,
        trust_path: &str,
        auth: ClientAuth,
    ) -> Result<TlsServer, String> {
        let certs = CertificateDer::pem_file_iter(cert_path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot load tls.server.certPath={cert_path:?}: {e}"))?;
        let key = PrivateKeyDer::from_pem_file(key_path)
            .map_err(|e| format!("cannot load tls.server.keyPath={key_path:?}: {e}"))?;
        Self::build(mode, certs, key, trust_path, auth)
    }

    /// A certificate of its own, made now and signed by its own key, for `names` (DNS names
    /// or IP addresses): what RocketMQ's TLS test mode (`tls.test.mode.enable`) serves when no
    /// certificate is configured. Clients that verify the server's certificate refuse it; the
    /// official 5.x Java client, which trusts any, connects.
    pub fn self_signed(mode: TlsMode, names: &[&str]) -> Result<TlsServer, String> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let made = rcgen::generate_simple_self_signed(names)
            .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
        let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
            .map_err(|e| format!("cannot use the self-signed certificate's key: {e}"))?;
        Self::build(
            mode,
            vec![made.cert.der().clone()],
            key,
            "",
            ClientAuth::None,
        )
    }

    fn build(
        mode: TlsMode,
        certs: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        trust_path: &str,
        auth: ClientAuth,
    ) -> Result<TlsServer, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if auth == ClientAuth::None {
            builder.with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            let bad = |e: &dyn fmt::Display| {
                format!("cannot load tls.server.trustCertPath={trust_path:?}: {e}")
            };
            for cert in CertificateDer::pem_file_iter(trust_path).map_err(|e| bad(&e))? {
                roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| bad(&e))?)
        };
        let config = builder
            .with_single_cert(certs, key)
            .map_err(|e| format!("tls.server.certPath / keyPath do not fit: {e}"))?;
        Ok(TlsServer {
            mode,
            config: Arc::new(config),
        })
    }

    /// The same, offering `protocols` by ALPN (gRPC clients need `h2`).
    pub fn with_alpn(&self, protocols: &[&[u8]]) -> TlsServer {
        let mut config = (*self.config).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        TlsServer {
            mode: self.mode,
            config: Arc::new(config),
        }
    }

    /// The rustls configuration (for a TLS acceptor of its own).
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.clone()
    }

    /// A new server session.
    pub fn session(&self) -> Result<ServerConnection, String> {
        let mut conn = ServerConnection::new(self.config.clone()).map_err(|e| e.to_string())?;
        // Whole responses are encrypted before any leaves: no limit on what waits to be sent.
        conn.set_buffer_limit(None);
        Ok(conn)
    }
}

/// Feed received ciphertext; append the plaintext it carried to `plain`. Returns whether the
/// peer closed the session. On an error the session's alert is left to be sent.
pub fn decrypt(
    conn: &mut ServerConnection,
    mut cipher: &[u8],
    plain: &mut Vec<u8>,
) -> Result<bool, String> {
    let mut closed = false;
    while !cipher.is_empty() {
        let n = conn.read_tls(&mut cipher).map_err(|e| e.to_string())?;
        let state = conn.process_new_packets().map_err(|e| e.to_string())?;
        let ready = state.plaintext_bytes_to_read();
        if ready > 0 {
            let start = plain.len();
            plain.resize(start + ready, 0);
            conn.reader()
                .read_exact(&mut plain[start..])
                .map_err(|e| e.to_string())?;
        }
        closed |= state.peer_has_closed();
        if n == 0 && ready == 0 {
            return Err("TLS input is stuck".into());
        }
    }
    Ok(closed)
}

/// Encrypt `parts` and append every record waiting to be sent to `cipher`.
pub fn encrypt(conn: &mut ServerConnection, parts: &[&[u8]], cipher: &mut Vec<u8>) {
    for part in parts {
        // The buffer limit is off: the writer takes everything.
        let _ = conn.writer().write_all(part);
    }
    pending(conn, cipher);
}

/// Append the records waiting to be sent (handshake messages, alerts) to `cipher`.
pub fn pending(conn: &mut ServerConnection, cipher: &mut Vec<u8>) {
    while conn.wants_write() {
        if conn.write_tls(cipher).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("nope.pem");
        let cert = cert.to_str().unwrap();
        let err =
            TlsServer::load(TlsMode::Enforcing, cert, cert, "", ClientAuth::None).unwrap_err();
        assert!(
            err.contains("tls.server.certPath") && err.contains("nope.pem"),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_pem_blocks_is_no_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let p = path.to_str().unwrap();
        let err = TlsServer::load(TlsMode::Permissive, p, p, "", ClientAuth::None).unwrap_err();
        assert!(err.contains("tls.server.keyPath"), "{err}");
    }
}
