//! Bound secrets and HTTP rules through the run's egress proxy, seen from inside the sandbox,
//! against a fake internet (band-test's lab: a network namespace the test makes, its resolver as
//! `dns_upstream`) where an HTTPS server of the test's own (its own CA, from rcgen; the config's
//! `proxy_extra_ca`) stands for the API. The script runs curl over HTTP/2 and HTTP/1.1.

use std::collections::BTreeMap;
use std::process::{Child, Command};

use band::proto::{Denial, Status};
use band_test::netlab::{At::*, Lab, Spec};

use super::helpers::*;

/// The lab and its HTTPS server (killed on drop).
struct Https {
    lab: Lab,
    server: Child,
    config: std::path::PathBuf,
}

impl Drop for Https {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

fn https_lab() -> Https {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let lab = Spec::new()
        .name("api.example.test", [V4(2)])
        .name("other.example.test", [V4(3)])
        .build();
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
    let ca = ca_params
        .self_signed(&ca_key)
        .unwrap_or_else(|e| panic!("ca: {e}"));
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
    let leaf = CertificateParams::new(vec![
        "api.example.test".to_string(),
        "other.example.test".to_string(),
    ])
    .unwrap_or_else(|e| panic!("params: {e}"))
    .signed_by(&leaf_key, &issuer)
    .unwrap_or_else(|e| panic!("leaf: {e}"));
    let dir = lab.dir().to_path_buf();
    fs_err::write(dir.join("ca.pem"), ca.pem()).unwrap_or_else(|e| panic!("write: {e}"));
    fs_err::write(dir.join("cert.pem"), leaf.pem()).unwrap_or_else(|e| panic!("write: {e}"));
    fs_err::write(dir.join("key.pem"), leaf_key.serialize_pem())
        .unwrap_or_else(|e| panic!("write: {e}"));
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/egress_https.py");
    let server = Command::new("ip")
        .args(["netns", "exec", lab.netns(), "/usr/bin/python3"])
        .arg(&script)
        .arg(&dir)
        .arg(dir.join("cert.pem"))
        .arg(dir.join("key.pem"))
        .arg(format!("{}:443", lab.v4(2)))
        .arg(format!("{}:443", lab.v4(3)))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("the lab's HTTPS server: {e}"));
    let mut h = Https {
        lab,
        server,
        config: std::path::PathBuf::new(),
    };
    band_test::wait_until("the lab's HTTPS server starts", || {
        if let Ok(Some(status)) = h.server.try_wait() {
            panic!("the HTTPS server exited: {status}");
        }
        dir.join("https.ready").exists()
    });
    let config = dir.join("egress.toml");
    let base = fs_err::read_to_string(&h.lab.config).unwrap_or_else(|e| panic!("lab config: {e}"));
    fs_err::write(
        &config,
        format!(
            "{base}proxy_extra_ca = \"{}\"\n",
            dir.join("ca.pem").display()
        ),
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    h.config = config;
    h
}

/// One request the test's server received.
fn received(lab: &Lab) -> Vec<serde_json::Value> {
    lab.log("https.log")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

const TOKEN: &str = "real-token-value-0123";

#[test]
fn privileged_egress_a_bound_secret_reaches_only_its_host_in_a_header() {
    privileged!();
    let h = https_lab();
    let script = r#"#!/bin/bash
code() { curl -sS -m 10 -o /tmp/body -w '%{http_code}' "$@" 2>/tmp/err || echo "rc$?"; }
echo "env=$API_TOKEN"
echo "in_environ=$(tr '\0' '\n' < /proc/self/environ | grep -c real-token-value)"
echo "bundle=$SSL_CERT_FILE"
echo "ok_h2=$(code --http2 -H "Authorization: Bearer $API_TOKEN" https://api.example.test/repos/acme/x/issues)"
echo "ok_h1=$(code --http1.1 -u "me:$API_TOKEN" https://api.example.test/repos/acme/y)"
echo "other=$(code --http2 -H "Authorization: Bearer $API_TOKEN" https://other.example.test/x)"
echo "query=$(code --http1.1 "https://api.example.test/repos/acme/x?t=$API_TOKEN")"
head -c 70000 /dev/zero | tr '\0' a > /tmp/big; printf '%s' "$API_TOKEN" >> /tmp/big
echo "body=$(code --http2 -X POST --data-binary @/tmp/big https://api.example.test/repos/acme/x/comments)"
echo "dns=$(code --http1.1 "https://$API_TOKEN.example.test/")"
echo "rule=$(code --http2 -X DELETE https://api.example.test/repos/acme/x)"
echo "said=$(cat /tmp/body)"
"#;
    let mut p = policy();
    p.allow.net = strs(&[
        "GET,POST https://api.example.test/repos/acme/**",
        "other.example.test",
    ]);
    p.allow.cli = strs(&["curl *", "head *", "tr *", "grep *", "cat *"]);
    p.secrets = strs(&["API_TOKEN"]);
    p.secret_hosts = BTreeMap::from([("API_TOKEN".to_string(), strs(&["api.example.test"]))]);
    let mut req = request(script, p);
    req.secrets = BTreeMap::from([("API_TOKEN".to_string(), TOKEN.to_string())]);
    let o = finish(spawn_with_config(&req, &h.config));
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    // Inside: only the placeholder, never the value.
    let ph = get("env");
    assert!(ph.starts_with("bandph") && ph.len() == 46, "{ph}");
    assert_eq!(get("in_environ"), "0");
    assert_eq!(get("bundle"), "/etc/band-ca.pem");
    // The bound host got the real value in its header, over HTTP/2 and HTTP/1.1 (Basic too).
    assert_eq!(get("ok_h2"), "200", "{o:#?}");
    assert_eq!(get("ok_h1"), "200", "{o:#?}");
    let got = received(&h.lab);
    let auths: Vec<&str> = got.iter().filter_map(|r| r["auth"].as_str()).collect();
    assert!(
        auths.contains(&format!("Bearer {TOKEN}").as_str()),
        "{got:#?}"
    );
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("me:{TOKEN}"));
    assert!(
        auths.contains(&format!("Basic {basic}").as_str()),
        "{got:#?}"
    );
    // Each way out for the placeholder is refused: another allowed host, a query string, a
    // body, a DNS name; and a method outside the HTTP rule, with the rule that would allow it.
    assert_eq!(get("other"), "403");
    assert_eq!(get("query"), "403");
    assert_eq!(get("body"), "403");
    assert!(get("dns").ends_with("rc6"), "not resolved: {}", get("dns"));
    assert_eq!(get("rule"), "403");
    assert_eq!(
        get("said"),
        "band: refused by the run's egress proxy: request DELETE https://api.example.test/repos/acme/x"
    );
    // The server saw two requests, never the placeholder, never other.example.test.
    for r in &got {
        let text = r.to_string();
        assert!(
            !text.contains(&ph),
            "the placeholder reached the server: {text}"
        );
        assert!(!text.contains("other.example.test"), "{text}");
    }
    assert_eq!(
        got.iter()
            .filter(|r| r["body"].as_str().unwrap_or("").is_empty())
            .count(),
        2,
        "{got:#?}"
    );
    let secret = |to: &str, place: &str| Denial::Secret {
        name: "API_TOKEN".into(),
        to: to.into(),
        place: place.into(),
    };
    for d in [
        secret("other.example.test:443", "header authorization"),
        secret("api.example.test:443", "query string"),
        secret("api.example.test:443", "body"),
        secret("DNS", "DNS name"),
        Denial::Http {
            method: "DELETE".into(),
            host: "api.example.test".into(),
            port: 443,
            https: true,
            path: "/repos/acme/x".into(),
            rule: None,
        },
    ] {
        assert!(
            o.result.denied.contains(&d),
            "{d:?} not in {:#?}",
            o.result.denied
        );
    }
    // The proxy's connections are in the run's report, under the host's name.
    let net = o
        .result
        .network
        .clone()
        .unwrap_or_else(|| panic!("no network report"));
    assert!(
        net.contacted.iter().any(|f| f.addr == h.lab.v4(2)
            && f.port == 443
            && f.names == vec!["api.example.test".to_string()]),
        "{net:#?}"
    );
    assert!(
        !net.contacted.iter().any(|f| f.addr == h.lab.v4(3)),
        "{net:#?}"
    );
    // Never the value, anywhere band-server said anything.
    let said =
        serde_json::to_string(&o.result).unwrap_or_else(|e| panic!("json: {e}")) + &o.server_stderr;
    assert!(!said.contains(TOKEN), "the value left band-server: {said}");
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    // Nothing of the run is left: its table (the proxy and its CA lived in band-server's
    // process, which has exited).
    let tables = band_tables();
    assert!(
        !tables.contains(&format!("band_{}", req.run_id)),
        "{tables:?}"
    );
}

/// A Java program that fetches its first argument and prints the status (HttpsURLConnection:
/// the JVM's own TLS, which reads only its trust store, never the PEM bundle or its variables).
const FETCH_JAVA: &str = r#"
public class Fetch {
    public static void main(String[] args) throws Exception {
        var c = (javax.net.ssl.HttpsURLConnection) new java.net.URL(args[0]).openConnection();
        c.setConnectTimeout(10000);
        c.setReadTimeout(10000);
        System.out.println(c.getResponseCode());
    }
}
"#;

/// `Fetch.class`, compiled by the host's javac; `None` without a JDK.
fn fetch_class(dir: &std::path::Path) -> Option<Vec<u8>> {
    fs_err::write(dir.join("Fetch.java"), FETCH_JAVA).unwrap_or_else(|e| panic!("write: {e}"));
    let ok = Command::new("javac")
        .arg("-d")
        .arg(dir)
        .arg(dir.join("Fetch.java"))
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| fs_err::read(dir.join("Fetch.class")).unwrap_or_else(|e| panic!("read: {e}")))
}

/// A proxied run's CA is trusted where a program looks without being told: curl and openssl
/// with every CA variable unset read the system bundle path (the run's bundle bound over it),
/// and a Java program reads the run's trust store through `JAVA_TOOL_OPTIONS`, which keeps
/// the run's own options first. Each fetch reaches the lab's server through the proxy.
#[test]
fn privileged_egress_the_system_store_and_java_trust_the_run_ca() {
    privileged!();
    let h = https_lab();
    let Some(class) = fetch_class(h.lab.dir()) else {
        panic!("this test needs a JDK (javac) on the host");
    };
    let script = r#"#!/bin/bash
unset SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS
echo "java_opts=$JAVA_TOOL_OPTIONS"
echo "curl=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' https://api.example.test/repos/acme/curl 2>/tmp/err || echo "rc$?")"
openssl s_client -connect api.example.test:443 -servername api.example.test -verify_return_error </dev/null >/tmp/ossl 2>&1
echo "openssl=$? $(grep -q 'Verify return code: 0 (ok)' /tmp/ossl && echo verified)"
echo "java=$(java -cp /skill Fetch https://api.example.test/repos/acme/java 2>/tmp/jerr | tail -1)"
echo "jerr=$(grep -v 'Picked up JAVA_TOOL_OPTIONS' /tmp/jerr | head -3 | tr '\n' ' ')"
"#;
    let mut p = policy();
    p.allow.net = strs(&["GET https://api.example.test/repos/acme/**"]);
    p.allow.cli = strs(&[
        "curl *",
        "openssl *",
        "java *",
        "grep *",
        "head *",
        "tail *",
        "tr *",
    ]);
    p.secrets = strs(&["JAVA_TOOL_OPTIONS"]);
    // Debian's JDK links its conf/security files into /etc/java-<N>-openjdk: the installation
    // brings that folder (no allow.read of it).
    let mut req = request(script, p);
    req.bundle.push(file("Fetch.class", 0o644, &class));
    req.bundle_sha256 = bundle_hash(&req.bundle);
    req.secrets = BTreeMap::from([("JAVA_TOOL_OPTIONS".to_string(), "-Xmx128m".to_string())]);
    let o = finish(spawn_with_config(&req, &h.config));
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    assert_eq!(
        get("java_opts"),
        "-Xmx128m -Djavax.net.ssl.trustStore=/etc/band-java-truststore.p12 \
         -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit"
    );
    assert_eq!(get("curl"), "200", "{o:#?}");
    assert_eq!(get("openssl"), "0 verified", "{o:#?}");
    assert_eq!(get("java"), "200", "{}", get("jerr"));
    let paths: Vec<String> = received(&h.lab)
        .iter()
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .collect();
    for want in ["/repos/acme/curl", "/repos/acme/java"] {
        assert!(paths.iter().any(|p| p == want), "{want} not in {paths:?}");
    }
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
}

/// A run that needs no proxy gets none of it: no Java options, and the system bundle is the
/// host's own.
#[test]
fn privileged_egress_a_run_without_the_proxy_keeps_the_hosts_store() {
    privileged!();
    let h = https_lab();
    let script = r#"#!/bin/bash
echo "java_opts=${JAVA_TOOL_OPTIONS-unset}"
echo "ssl=${SSL_CERT_FILE-unset}"
echo "certs=$(grep -c BEGIN /etc/ssl/certs/ca-certificates.crt)"
"#;
    let mut p = policy();
    p.allow.net = strs(&["api.example.test"]);
    p.allow.cli = strs(&["grep *"]);
    let o = finish(spawn_with_config(&request(script, p), &h.config));
    let host = fs_err::read_to_string("/etc/ssl/certs/ca-certificates.crt")
        .unwrap_or_else(|e| panic!("the host's bundle: {e}"))
        .matches("BEGIN")
        .count();
    let kv = o.kv();
    assert_eq!(
        kv.get("java_opts").map(String::as_str),
        Some("unset"),
        "{o:#?}"
    );
    assert_eq!(kv.get("ssl").map(String::as_str), Some("unset"), "{o:#?}");
    assert_eq!(kv.get("certs"), Some(&host.to_string()), "{o:#?}");
}

/// A band-server config of `lab`'s with `extra` appended (in the lab's folder).
fn lab_config(lab: &Lab, name: &str, extra: &str) -> std::path::PathBuf {
    let base = fs_err::read_to_string(&lab.config).unwrap_or_else(|e| panic!("lab config: {e}"));
    let config = lab.dir().join(name);
    fs_err::write(&config, format!("{base}{extra}\n")).unwrap_or_else(|e| panic!("write: {e}"));
    config
}

/// A proxied run (an HTTP rule) under `config`: it fails in the network layer before its
/// script ran, with a message holding each of `says`, and leaves no table, lease or run folder.
fn fails_closed(config: &std::path::Path, says: &[&str]) {
    let mut p = policy();
    p.allow.net = strs(&["GET https://api.example.test/**"]);
    let req = request("#!/bin/bash\necho ran\n", p);
    let o = finish(spawn_with_config(&req, config));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let e = o
        .result
        .error
        .clone()
        .unwrap_or_else(|| panic!("no error: {o:#?}"));
    assert_eq!(e.layer, band::proto::Layer::Network, "{e:?}");
    for s in says {
        assert!(e.message.contains(s), "{s:?} not in {:?}", e.message);
    }
    assert!(!o.result.stdout.contains("ran"), "{o:#?}");
    let tables = band_tables();
    assert!(
        !tables.contains(&format!("band_{}", req.run_id)),
        "{tables:?}"
    );
    wait_until_no_lease_names(&req.run_id);
    assert!(!a_lease_names(&req.run_id), "a lease names {}", req.run_id);
    let dir = state_dir().join("runs").join(&req.run_id);
    assert!(!dir.exists(), "{} is left", dir.display());
}

/// The proxy cannot listen (its TLS port is the DNS stub's, already bound in the run's
/// namespace): the run does not start, the error names the proxy and the address.
#[test]
fn privileged_egress_a_proxy_that_cannot_listen_stops_the_run() {
    privileged!();
    let lab = Spec::new().name("api.example.test", [V4(2)]).build();
    let config = lab_config(&lab, "busy.toml", "proxy_ports = [53, 80]");
    fails_closed(
        &config,
        &["egress proxy cannot listen on 127.77.", ":53", "in use"],
    );
}

/// The config's extra CA unreadable, or not PEM: the run does not start, the error names the
/// proxy and the file.
#[test]
fn privileged_egress_a_bad_extra_ca_stops_the_run() {
    privileged!();
    let lab = Spec::new().name("api.example.test", [V4(2)]).build();
    let missing = lab.dir().join("missing-ca.pem");
    let config = lab_config(
        &lab,
        "missing.toml",
        &format!("proxy_extra_ca = \"{}\"", missing.display()),
    );
    fails_closed(&config, &["egress proxy", &missing.display().to_string()]);
    let garbage = lab.dir().join("garbage-ca.pem");
    fs_err::write(&garbage, "not a certificate\n").unwrap_or_else(|e| panic!("write: {e}"));
    let config = lab_config(
        &lab,
        "garbage.toml",
        &format!("proxy_extra_ca = \"{}\"", garbage.display()),
    );
    fails_closed(
        &config,
        &[
            "egress proxy",
            &garbage.display().to_string(),
            "no PEM certificate",
        ],
    );
}

/// A refusal of the proxy is an event when it happens: the `denied` event comes before what the
/// script printed after the refused request, and the result holds it once.
#[test]
fn privileged_egress_a_proxy_denial_streams_when_it_happens() {
    privileged!();
    let h = https_lab();
    let script = r#"#!/bin/bash
curl -sS -m 10 -o /dev/null -w 'code=%{http_code}\n' -X DELETE https://api.example.test/repos/acme/x
echo after
"#;
    let mut p = policy();
    p.allow.net = strs(&["GET https://api.example.test/repos/acme/**"]);
    p.allow.cli = strs(&["curl *"]);
    let req = request(script, p);
    let o = finish(spawn_with_config(&req, &h.config));
    assert_eq!(
        o.kv().get("code").map(String::as_str),
        Some("403"),
        "{o:#?}"
    );
    let refused = Denial::Http {
        method: "DELETE".into(),
        host: "api.example.test".into(),
        port: 443,
        https: true,
        path: "/repos/acme/x".into(),
        rule: None,
    };
    let denied_at = o
        .events
        .iter()
        .position(|e| matches!(e, band::proto::Event::Denied(d) if *d == refused))
        .unwrap_or_else(|| panic!("no denied event: {:#?}", o.events));
    let after_at = o
        .events
        .iter()
        .position(|e| matches!(e, band::proto::Event::Stdout { data } if data.contains("after")))
        .unwrap_or_else(|| panic!("no stdout event with `after`: {:#?}", o.events));
    assert!(denied_at < after_at, "{:#?}", o.events);
    assert_eq!(
        o.result.denied.iter().filter(|d| **d == refused).count(),
        1,
        "{:#?}",
        o.result.denied
    );
}

/// Refused requests with long paths, many of them over one kept-alive connection: each one is a
/// denial, streamed once and in the result once (the end adds none twice), and each names the
/// path cut to its first KiB with its length (the proxy held, and the result carried, every path
/// whole).
#[test]
fn privileged_egress_refused_requests_keep_their_paths_cut_and_are_each_one_denial() {
    privileged!();
    let h = https_lab();
    let script = r#"#!/bin/bash
long=$(head -c 60000 /dev/zero | tr '\0' a)
for i in $(seq 40); do
  printf 'url = "https://api.example.test/%s"\noutput = "/dev/null"\n' "$long" >> /tmp/urls
done
echo "codes=$(curl -sS -m 60 --http1.1 -w '%{http_code} ' -K /tmp/urls)"
"#;
    let mut p = policy();
    p.allow.net = strs(&["GET https://api.example.test/repos/acme/**"]);
    p.allow.cli = strs(&["curl *", "head *", "tr *", "seq *"]);
    let req = request(script, p);
    let o = finish(spawn_with_config(&req, &h.config));
    assert_eq!(
        o.kv().get("codes").map(String::as_str),
        Some(["403"; 40].join(" ").as_str()),
        "{o:#?}"
    );
    let refused = Denial::Http {
        method: "GET".into(),
        host: "api.example.test".into(),
        port: 443,
        https: true,
        path: format!("/{}… 60001 bytes", "a".repeat(1023)),
        rule: None,
    };
    let http: Vec<&Denial> = o
        .result
        .denied
        .iter()
        .filter(|d| matches!(d, Denial::Http { .. }))
        .collect();
    assert_eq!(http.len(), 40, "{:#?}", o.result.denied);
    assert!(http.iter().all(|d| **d == refused), "{http:#?}");
    let streamed = o
        .events
        .iter()
        .filter(|e| matches!(e, band::proto::Event::Denied(d) if *d == refused))
        .count();
    assert_eq!(streamed, 40);
    assert!(received(&h.lab).is_empty(), "{:?}", received(&h.lab));
}
