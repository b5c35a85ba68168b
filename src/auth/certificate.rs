//! The caller of a client certificate: its identity, parsed with x509-parser (rustls has
//! verified the certificate already). The first URI SAN (a SPIFFE id), else the first DNS SAN,
//! else the first email SAN, else the subject CN: a service mesh's workloads carry only SANs,
//! and two of them must never be one caller.

use rustls::pki_types::CertificateDer;
use x509_parser::{certificate::X509Certificate, extensions::GeneralName};

/// The identity a DER certificate names, if any (empty names count as none).
pub fn identity(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    // The first of the best rank (`min_by_key` keeps the first of equals).
    subject_alt_names(&parsed)
        .iter()
        .filter_map(ranked)
        .filter(|(_, name)| !name.is_empty())
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, name)| name.to_owned())
        .or_else(|| subject_cn(&parsed))
}

/// A SAN that can name a caller, with its rank: URI, then DNS, then email.
fn ranked<'a>(name: &GeneralName<'a>) -> Option<(u8, &'a str)> {
    match *name {
        GeneralName::URI(uri) => Some((0, uri)),
        GeneralName::DNSName(dns) => Some((1, dns)),
        GeneralName::RFC822Name(email) => Some((2, email)),
        _ => None,
    }
}

/// The certificate's SANs (none when it has no such extension, or an unreadable one).
fn subject_alt_names<'a>(cert: &'a X509Certificate<'_>) -> Vec<GeneralName<'a>> {
    match cert.subject_alternative_name() {
        Ok(Some(extension)) => extension.value.general_names.clone(),
        _ => Vec::new(),
    }
}

/// The subject CN, if it has a non-empty one.
fn subject_cn(cert: &X509Certificate<'_>) -> Option<String> {
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str()
        .ok()
        .filter(|cn| !cn.is_empty())
        .map(str::to_owned)
}
