//! The caller of a client certificate: its subject's common name (CN), parsed with
//! x509-parser (rustls has verified the certificate already).

use rustls::pki_types::CertificateDer;

/// The subject CN of a DER certificate, if it has one.
pub fn subject_cn(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let cn = parsed.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}
