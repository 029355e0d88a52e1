//! `band mcp --http`: MCP over Streamable HTTP.
//!
//! - who may listen and call: a public address without a token is refused at startup; on the
//!   address served, a request without the token, with a foreign Origin or a foreign Host is
//!   refused before the protocol (plain HTTP, written by hand, so the test sees the status);
//! - the official conformance suite (`@modelcontextprotocol/conformance`, server mode), for the
//!   2025-11-25 and 2026-07-28 requirement sets, against the fixture tools in
//!   `tests/fixtures/mcp-conformance` (real skills, run in the sandbox: `privileged_*`). Its
//!   failures must be exactly those in `tests/mcp/conformance/expected-failures-<revision>.yml`
//!   (a new failure fails, and so does one listed that now passes). `$BAND_TEST_MCP_CONFORMANCE`
//!   is the suite's `dist/index.js`, run by `$BAND_TEST_NODE`; `.ci/run` installs both. The Skills
//!   extension's three scenarios (`sep-2640-*`) run by name and must pass every check.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::{DATA_DIR, band_exe, bin, repo, sandbox_missing};

/// A `band mcp --http 127.0.0.1:0` and the port it serves.
pub(crate) struct Served {
    child: Child,
    pub(crate) port: u16,
}

impl Served {
    fn start(skills: &Path, ws: &Path, args: &[&str], token: Option<&str>) -> Served {
        let mut env = bin().env("BAND_DATA_DIR", DATA_DIR);
        if let Some(t) = token {
            env = env.env("BAND_MCP_TOKEN", t);
        }
        Served::start_with(&env, skills, ws, args)
    }

    /// [`Served::start`] with `env`'s environment (its own data folder, say) and no token.
    pub(crate) fn start_with(
        env: &band_test::Band,
        skills: &Path,
        ws: &Path,
        args: &[&str],
    ) -> Served {
        let mut cmd = Command::new(band_exe());
        cmd.args(["mcp", "--http", "127.0.0.1:0", "--workspace"])
            .arg(ws)
            .arg("--skills")
            .arg(skills)
            .args(args)
            .current_dir(ws)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        env.apply(&mut cmd);
        let mut child = cmd.spawn().expect("band mcp --http");
        let stderr = child.stderr.take().expect("stderr");
        // Dropped (killed and reaped) on any panic below.
        let mut served = Served { child, port: 0 };
        let mut err = BufReader::new(stderr);
        // The line that says where it serves (a debug build scans the skills first).
        let mut line = String::new();
        loop {
            line.clear();
            let n = err.read_line(&mut line).expect("read stderr");
            assert!(n > 0, "band mcp --http exited before serving");
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                served.port = rest.split('/').next().expect("port").parse().expect("port");
                // Keep draining stderr so band never blocks on it.
                std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
                return served;
            }
        }
    }

    /// One HTTP/1.1 POST of `body` to /mcp with `headers`: the status code and the body.
    fn post(&self, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nConnection: close\r\n\
             Content-Length: {}\r\n",
            body.len()
        );
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: 127.0.0.1:{}\r\n", self.port));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        let status = out
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {out}"));
        (status, out)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"band-tests","version":"0"}}}"#;

#[test]
fn mcp_http_on_a_public_address_needs_a_token() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = repo().join("skills");
    let skills = skills.to_str().expect("utf8");
    let out = bin().output(
        &["mcp", "--skills", skills, "--http", "0.0.0.0:0"],
        t.path(),
    );
    band_test::band_snapshot!(out, "mcp_http_public_without_token");
}

#[test]
fn mcp_http_refuses_no_token_a_foreign_origin_and_a_foreign_host() {
    let t = tempfile::tempdir().expect("tmp");
    let server = Served::start(&repo().join("skills"), t.path(), &[], Some("s3cret-token"));
    let auth = ("Authorization", "Bearer s3cret-token");
    let (status, body) = server.post(&[], INITIALIZE);
    assert_eq!(status, 401, "{body}");
    assert!(
        body.contains("WWW-Authenticate: Bearer") || body.contains("www-authenticate: Bearer"),
        "{body}"
    );
    let (status, body) = server.post(&[("Authorization", "Bearer wrong")], INITIALIZE);
    assert_eq!(status, 401, "{body}");
    let (status, body) = server.post(&[auth, ("Origin", "https://evil.example")], INITIALIZE);
    assert_eq!(status, 403, "{body}");
    let (status, body) = server.post(&[auth, ("Host", "evil.example")], INITIALIZE);
    assert_eq!(status, 403, "{body}");
    // With the token, from a loopback origin: served, in a session.
    let origin = format!("http://localhost:{}", server.port);
    let (status, body) = server.post(&[auth, ("Origin", &origin)], INITIALIZE);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.to_ascii_lowercase().contains("mcp-session-id:"),
        "{body}"
    );
    assert!(body.contains(r#""serverInfo":{"name":"band""#), "{body}");
}

/// The conformance suite, or why not: `(node, suite)`.
fn conformance(test: &str) -> Option<(String, String)> {
    let Ok(suite) = std::env::var("BAND_TEST_MCP_CONFORMANCE") else {
        assert_ne!(
            std::env::var(band::proto::env::TEST_MUST_RUN).as_deref(),
            Ok("1"),
            "{test}: BAND_TEST_MCP_CONFORMANCE is not set and BAND_TEST_MUST_RUN is set"
        );
        eprintln!(
            "skipped: {test}: BAND_TEST_MCP_CONFORMANCE is not set (npm install \
             @modelcontextprotocol/conformance; its dist/index.js)"
        );
        return None;
    };
    let node = std::env::var("BAND_TEST_NODE").unwrap_or_else(|_| "node".into());
    Some((node, suite))
}

#[test]
fn privileged_mcp_http_passes_the_conformance_suite_but_its_listed_exceptions() {
    band_test::privileged!(sandbox_missing());
    let test = "privileged_mcp_http_passes_the_conformance_suite_but_its_listed_exceptions";
    let Some((node, suite)) = conformance(test) else {
        return;
    };
    let t = tempfile::tempdir().expect("tmp");
    let server = Served::start(
        &repo().join("tests/fixtures/mcp-conformance"),
        t.path(),
        &["--script-tool-names"],
        None,
    );
    for revision in ["2025-11-25", "2026-07-28"] {
        let expected = repo().join(format!(
            "tests/mcp/conformance/expected-failures-{revision}.yml"
        ));
        let out = Command::new(&node)
            .arg(&suite)
            .args(["server", "--url"])
            .arg(format!("http://127.0.0.1:{}/mcp", server.port))
            .args(["--requirements", revision, "--expected-failures"])
            .arg(&expected)
            .arg("-o")
            .arg(t.path().join(revision))
            .env("NO_COLOR", "1")
            .output()
            .expect("run the conformance suite");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "conformance {revision}: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("Baseline check passed"),
            "conformance {revision}:\n{stdout}"
        );
        // The fixture tools ran, in the sandbox.
        for scenario in [
            "tools-call-simple-text",
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-error",
            "tools-call-with-progress",
            "dns-rebinding-protection",
        ] {
            assert!(
                stdout.contains(&format!("✓ {scenario}:")),
                "conformance {revision}: {scenario} did not pass:\n{stdout}"
            );
        }
    }
    // The Skills extension (SEP-2640): not on a revision's timeline, so run by name; every check
    // passes, directoryRead's too (no expected failures, no warnings).
    for scenario in [
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
        "sep-2640-skills-directory",
    ] {
        let out = Command::new(&node)
            .arg(&suite)
            .args(["server", "--url"])
            .arg(format!("http://127.0.0.1:{}/mcp", server.port))
            .args(["--scenario", scenario, "-o"])
            .arg(t.path().join(scenario))
            .env("NO_COLOR", "1")
            .output()
            .expect("run the conformance suite");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{scenario}: {}\n{stdout}", out.status);
        assert!(
            stdout.contains(", 0 failed, 0 warnings") && !stdout.contains("SKIPPED"),
            "{scenario}:\n{stdout}"
        );
    }
}

/// Loopback is no boundary between the users of a machine: without a token, band mcp --http
/// served every local user, whose calls ran with this user's workspace and secrets. Now the
/// kernel's table of sockets says whose each client is, and another user's connection is closed
/// before a byte of HTTP is read; this user's (here root's) is served.
#[test]
fn privileged_mcp_http_without_a_token_serves_only_its_own_user() {
    band_test::privileged!(None::<String>);
    let t = tempfile::tempdir().expect("tmp");
    let server = Served::start(&repo().join("skills"), t.path(), &[], None);
    let (status, body) = server.post(&[], INITIALIZE);
    assert_eq!(status, 200, "{body}");
    // The same request from `nobody`, on the same loopback.
    let client = format!(
        "import socket\n\
         s = socket.create_connection(('127.0.0.1', {port}))\n\
         body = {body:?}\n\
         s.sendall(('POST /mcp HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\nContent-Type: application/json\\r\\n'\n\
           'Accept: application/json, text/event-stream\\r\\nConnection: close\\r\\n'\n\
           'Content-Length: %d\\r\\n\\r\\n%s' % (len(body), body)).encode())\n\
         out = b''\n\
         try:\n\
         \x20   while True:\n\
         \x20       d = s.recv(65536)\n\
         \x20       if not d: break\n\
         \x20       out += d\n\
         except ConnectionResetError:\n\
         \x20   pass\n\
         print(repr(out))\n",
        port = server.port,
        body = INITIALIZE,
    );
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &client,
        ])
        .output()
        .expect("setpriv");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "b''");
    // And this user still is.
    let (status, body) = server.post(&[], INITIALIZE);
    assert_eq!(status, 200, "{body}");
}
