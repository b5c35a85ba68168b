//! TLS for the gRPC listener: rustls (ring) with the configured certificate, read again on
//! reload, and optionally client certificates verified against a CA. Clients without a
//! certificate may still connect (health probes); the auth gate refuses their calls. The
//! handshake and the first request head after it share one deadline (`limits.header_timeout`).

use std::{
    io,
    path::Path,
    sync::{Arc, RwLock},
    time::Duration,
};

use axum::serve::Listener;

use rustls::{
    RootCertStore, ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier},
    sign::CertifiedKey,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::mpsc,
    time::Instant,
};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::{
    domain::config::{ConfigError, TlsFiles},
    net::Guarded,
};

/// Handshaken connections waiting for the server to take them.
const BACKLOG: usize = 128;

/// The listener's certificate; [`Self::reload`] reads the files again.
#[derive(Debug)]
pub struct CertReloader {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
    provider: Arc<CryptoProvider>,
}

impl CertReloader {
    /// Reads the certificate and key again; on failure the old ones stay in use.
    pub fn reload(&self) -> Result<(), Vec<ConfigError>> {
        let key = load(&self.files, &self.provider)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
        Ok(())
    }
}

impl ResolvesServerCert for CertReloader {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// The TLS acceptor for `files`, verifying client certificates against `client_ca` if given,
/// and the handle that reloads the certificate. Every file is read now; each problem is an
/// error at the field that names the file.
pub fn acceptor(
    files: &TlsFiles,
    client_ca: Option<&Path>,
) -> Result<(TlsAcceptor, Arc<CertReloader>), Vec<ConfigError>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = load(files, &provider);
    let verifier = client_ca.map(|ca| client_verifier(ca, provider.clone()));
    let (key, verifier) = match (key, verifier.transpose()) {
        (Ok(key), Ok(verifier)) => (key, verifier),
        (key, verifier) => {
            let errors = [key.err(), verifier.err().map(|e| vec![e])];
            return Err(errors.into_iter().flatten().flatten().collect());
        }
    };
    let reloader = Arc::new(CertReloader {
        current: RwLock::new(Arc::new(key)),
        files: files.clone(),
        provider: provider.clone(),
    });
    let builder = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| vec![ConfigError::new("tls", format!("TLS: {e}"))])?;
    let builder = match verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(reloader.clone());
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(config)), reloader))
}

/// Verifies client certificates against the CA in `ca` (clients without one may connect; the
/// auth gate refuses their calls).
fn client_verifier(
    ca: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, ConfigError> {
    let field = "auth.client_ca";
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca).map_err(|reason| ConfigError::new(field, reason))? {
        roots.add(cert).map_err(|e| {
            ConfigError::new(
                field,
                format!("{}: not a usable CA certificate: {e}", ca.display()),
            )
        })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| ConfigError::new(field, format!("{}: {e}", ca.display())))
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(certs)
}

/// The certificate chain and key of `files`, each problem at its field.
fn load(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, Vec<ConfigError>> {
    let chain = certificates(&files.cert).map_err(|reason| ConfigError::new("tls.cert", reason));
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        let reason = format!(
            "cannot read the private key from {}: {e}",
            files.key.display()
        );
        ConfigError::new("tls.key", reason)
    });
    let (chain, key) = match (chain, key) {
        (Ok(chain), Ok(key)) => (chain, key),
        (chain, key) => return Err([chain.err(), key.err()].into_iter().flatten().collect()),
    };
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        let reason = format!(
            "{} does not go with the certificate in {}: {e}",
            files.key.display(),
            files.cert.display()
        );
        vec![ConfigError::new("tls.key", reason)]
    })
}

/// TLS connections for the gRPC server: takes the connections `listener` admits and completes
/// each handshake in its own task, so a slow client never holds up the others. A client has
/// `head_within` from its connection to finish the handshake and send its first request head.
pub fn incoming<L, T>(
    mut listener: L,
    acceptor: TlsAcceptor,
    head_within: Duration,
    stop: CancellationToken,
) -> ReceiverStream<Result<Guarded<TlsStream<T>>, io::Error>>
where
    L: Listener<Io = Guarded<T>>,
    L::Addr: std::fmt::Debug,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(BACKLOG);
    tokio::spawn(async move {
        loop {
            let (connection, peer) = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let deadline = Instant::now() + head_within;
                // The place in the budget is held through the handshake, then by the TLS stream.
                let (tcp, permit) = connection.into_parts();
                match tokio::time::timeout_at(deadline, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let tls = Guarded::new(tls, permit).head_by(deadline);
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(error)) => tracing::debug!(?peer, %error, "TLS handshake failed"),
                    Err(_) => tracing::debug!(?peer, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
