//! The run's certificate authority: made in memory when the proxy starts, dropped with it.
//!
//! Its key never leaves band-server's memory (nothing writes it anywhere); the run trusts its
//! certificate (the bundle in the run's `/etc`, [`Ca::pem`]). For each host the run reaches
//! through the proxy, [`Ca::resolver`] signs a leaf certificate on the first handshake that
//! names it (SNI), and only for a host the proxy serves: any other name fails the handshake.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// What went wrong making the run's CA or a leaf.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("cannot make the run's certificate authority: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("cannot load a leaf key into TLS: {0}")]
    Key(#[from] rustls::Error),
}

/// The run's CA.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A new CA for run `run_id` (its name says which run it belongs to).
    pub fn new(run_id: &str) -> Result<Ca, CaError> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(
            DnType::CommonName,
            format!("band run {run_id} egress proxy"),
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca {
            issuer: Issuer::new(params, key),
            pem: cert.pem(),
        })
    }

    /// The CA's certificate, PEM: what the run trusts.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A leaf certificate for `host`, signed by the CA, with its key.
    pub fn leaf(&self, host: &str) -> Result<CertifiedKey, CaError> {
        let mut params = CertificateParams::new(vec![host.to_string()])?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signer = rustls::crypto::ring::sign::any_supported_type(&der)?;
        Ok(CertifiedKey::new(
            vec![CertificateDer::from(cert.der().to_vec())],
            signer,
        ))
    }

    /// A certificate resolver serving a leaf for each name `serves` admits.
    pub fn resolver(
        self: Arc<Self>,
        serves: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> Arc<LeafResolver> {
        Arc::new(LeafResolver {
            ca: self,
            serves,
            leaves: Mutex::new(HashMap::new()),
        })
    }
}

/// Signs (once) and serves the leaf of each host the proxy serves, by SNI.
pub struct LeafResolver {
    ca: Arc<Ca>,
    serves: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    leaves: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl std::fmt::Debug for LeafResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeafResolver").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for LeafResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let host = hello.server_name()?.to_ascii_lowercase();
        if !(self.serves)(&host) {
            return None;
        }
        let mut leaves = self.leaves.lock().ok()?;
        if let Some(k) = leaves.get(&host) {
            return Some(k.clone());
        }
        let key = Arc::new(self.ca.leaf(&host).ok()?);
        leaves.insert(host, key.clone());
        Some(key)
    }
}
