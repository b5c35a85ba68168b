//! A private certificate authority for TLS tests: server and client certificates, as PEM.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, SanType,
};

/// A fresh CA.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// Its certificate (PEM), for clients and servers to trust.
    pub pem: String,
}

/// A certificate and its private key, as PEM.
pub struct Issued {
    /// The certificate.
    pub cert: String,
    /// The private key.
    pub key: String,
}

impl Ca {
    /// A new CA with its own key.
    pub fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (server names, or anything for a client), signed by this CA.
    pub fn issue(&self, names: &[&str]) -> Issued {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// A client certificate naming exactly these SANs and, if given, this subject CN (nothing
    /// else in its subject), signed by this CA.
    pub fn issue_identity(&self, sans: Vec<SanType>, cn: Option<&str>) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.subject_alt_names = sans;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}
