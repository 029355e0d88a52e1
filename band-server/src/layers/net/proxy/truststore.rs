//! Where a proxied run's TLS clients find its CA: the system bundle paths the sandbox's view has
//! (bound over with the run's bundle), and for Java a PKCS#12 trust store of its own.
//!
//! Pure: the bundle's text in, the trust store's bytes out; the paths are data the fs layer
//! binds and writes.

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

pub use crate::common::handover::{JAVA_TRUSTSTORE, SYSTEM_BUNDLES};

/// Where the host has its Java installations (Debian's and RHEL's `java` alternatives point
/// there): a host with this folder gets a Java trust store in its proxied runs.
pub const JVM_DIR: &str = "/usr/lib/jvm";

/// The trust store's password: Java's conventional one. It protects nothing (the store holds
/// only public certificates); PKCS#12 and Java's loader want one.
pub const JAVA_TRUSTSTORE_PASSWORD: &str = "changeit";

/// The variable that points every JVM of the run at [`JAVA_TRUSTSTORE`] (read by the JVM at
/// start, whatever launched it).
pub const JAVA_TOOL_OPTIONS: &str = "JAVA_TOOL_OPTIONS";

/// The options the run's JVMs get, appended to a `JAVA_TOOL_OPTIONS` the run already has.
pub fn java_options(existing: Option<&str>) -> String {
    let ours = format!(
        "-Djavax.net.ssl.trustStore={JAVA_TRUSTSTORE} -Djavax.net.ssl.trustStoreType=PKCS12 \
         -Djavax.net.ssl.trustStorePassword={JAVA_TRUSTSTORE_PASSWORD}"
    );
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) => format!("{e} {ours}"),
        None => ours,
    }
}

/// Why the trust store could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TrustStoreError {
    #[error("the run's CA certificate is not PEM: {0}")]
    Ca(String),
    #[error("cannot write the Java trust store: {0}")]
    Write(#[from] p12_keystore::error::Error),
}

/// The run's Java trust store: a PKCS#12 file of trusted-certificate entries (the attribute that
/// makes Java trust an entry is p12-keystore's for every certificate entry), the run's CA
/// (`ca_pem`) first and every certificate of `system_pem` (the host's bundle) that parses;
/// one that does not is skipped, as every TLS client does. The run's CA must parse.
pub fn java_truststore(ca_pem: &str, system_pem: &str) -> Result<Vec<u8>, TrustStoreError> {
    use p12_keystore::{Certificate, KeyStore, KeyStoreEntry};
    let mut store = KeyStore::new();
    let ca = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
        .next()
        .ok_or_else(|| TrustStoreError::Ca("no certificate".into()))?
        .map_err(|e| TrustStoreError::Ca(e.to_string()))?;
    let ca = Certificate::from_der(&ca).map_err(|e| TrustStoreError::Ca(e.to_string()))?;
    store.add_entry("band-run-ca", KeyStoreEntry::Certificate(ca));
    for (i, cert) in system_certs(system_pem).iter().enumerate() {
        store.add_entry(
            &format!("system-{i}"),
            KeyStoreEntry::Certificate(cert.clone()),
        );
    }
    // The iterations protect nothing here (a public password over public certificates): few,
    // so a run does not spend milliseconds deriving keys.
    Ok(store
        .writer(JAVA_TRUSTSTORE_PASSWORD)
        .encryption_iterations(1)
        .mac_iterations(1)
        .write()?)
}

/// The certificates of the host's bundle `pem` that parse, parsed once for each text of it
/// (every proxied run of a host with Java reads the same bundle).
fn system_certs(pem: &str) -> std::sync::Arc<Vec<p12_keystore::Certificate>> {
    use std::sync::{Arc, Mutex, OnceLock};
    type Parsed = Option<(String, Arc<Vec<p12_keystore::Certificate>>)>;
    static CACHE: OnceLock<Mutex<Parsed>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(None));
    if let Ok(c) = cache.lock()
        && let Some((text, certs)) = c.as_ref()
        && text == pem
    {
        return certs.clone();
    }
    let certs: Arc<Vec<p12_keystore::Certificate>> = Arc::new(
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .filter_map(Result::ok)
            .filter_map(|der| p12_keystore::Certificate::from_der(&der).ok())
            .collect(),
    );
    if let Ok(mut c) = cache.lock() {
        *c = Some((pem.to_string(), certs.clone()));
    }
    certs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(name: &str) -> String {
        let mut params =
            rcgen::CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        params
            .self_signed(&key)
            .unwrap_or_else(|e| panic!("{e}"))
            .pem()
    }

    #[test]
    fn java_options_append_to_the_runs_own() {
        let ours = java_options(None);
        assert!(ours.starts_with("-Djavax.net.ssl.trustStore=/etc/band-java-truststore.p12 "));
        assert_eq!(java_options(Some("  ")), ours);
        assert_eq!(java_options(Some("-Xmx64m")), format!("-Xmx64m {ours}"));
    }

    #[test]
    fn the_trust_store_holds_the_run_ca_and_the_system_certificates_as_trusted() {
        let system = format!("{}junk\n{}", ca("one"), ca("two"));
        let bytes = java_truststore(&ca("run"), &system).unwrap_or_else(|e| panic!("{e}"));
        let read = p12_keystore::KeyStore::from_pkcs12(
            &bytes,
            JAVA_TRUSTSTORE_PASSWORD,
            p12_keystore::Pkcs12ImportPolicy::Strict,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // Strict import keeps only trusted certificate entries: all three are.
        let subjects: Vec<String> = read
            .entries()
            .filter_map(|(_, e)| match e {
                p12_keystore::KeyStoreEntry::Certificate(c) => Some(c.subject().to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(subjects, ["CN=run", "CN=one", "CN=two"], "{subjects:?}");
    }

    #[test]
    fn a_run_ca_that_is_not_pem_is_an_error() {
        assert!(matches!(
            java_truststore("not pem", ""),
            Err(TrustStoreError::Ca(_))
        ));
    }
}
