//! What an agent does with band over MCP, with both official SDKs (TypeScript and Python), over
//! both transports (stdio, and Streamable HTTP from `band mcp --http`): list the tools, call one
//! (a result), call it with a bad input (a tool error), call one whose stderr lines come back as
//! progress, cancel a call while it runs, and `skills/list` and `skills/get` (the Skills
//! extension). The clients are `tests/mcp/agent.py` and `tests/mcp/agent.mjs`; each prints one
//! report, and the four reports must be the same. The cancelled run is checked from outside
//! while the client's session is still open: recorded `cancelled`, no process, cgroup or run
//! folder left of it (so the cancel stopped it, not the end of the session).
//!
//! And 32 calls from four clients at once over HTTP, each run meeting two peers while it runs
//! (`tests/mcp/many.py`): all answered, none run after another.
//!
//! `.ci/run` installs both SDKs (`$BAND_TEST_PYTHON`, `$BAND_TEST_NODE` beside the TypeScript SDK).
//! Without one the test is skipped, unless `BAND_TEST_MUST_RUN=1`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use band_test::Band;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::cancel::{leftovers, records, sleepy_skill};
use crate::common::{band_exe, repo, sandbox_missing};
use crate::mcp::{has_mcp_sdk, python};
use crate::mcp_http::Served;

/// The node_modules folder of the TypeScript SDK, and node, or why not.
pub(crate) fn node_sdk() -> Option<(String, PathBuf)> {
    let node = std::env::var("BAND_TEST_NODE").ok()?;
    // `<node_modules>/.bin/node`
    let modules = Path::new(&node).parent()?.parent()?.to_path_buf();
    modules
        .join("@modelcontextprotocol/sdk/package.json")
        .is_file()
        .then_some((node, modules))
}

/// Both SDKs, or a skip (a failure under `BAND_TEST_MUST_RUN=1`).
pub(crate) fn clients_ready(test: &str) -> Option<(String, PathBuf)> {
    let must = std::env::var(band::proto::env::TEST_MUST_RUN).as_deref() == Ok("1");
    let node = node_sdk();
    let why = if !has_mcp_sdk() {
        format!("{} has no `mcp` package", python())
    } else if node.is_none() {
        "BAND_TEST_NODE is not beside @modelcontextprotocol/sdk".to_string()
    } else {
        return node;
    };
    assert!(!must, "{test}: {why} and BAND_TEST_MUST_RUN is set");
    eprintln!("skipped: {test}: {why}");
    None
}

/// `t/skills`: a copy of the `text` skill, and `probe` with `sleepy` (ticks until stopped) and
/// `ticks` (two stderr lines, then its output).
pub(crate) fn agent_skills(t: &Path, b: &Band) -> PathBuf {
    let skills = t.join("skills");
    fs_err::create_dir_all(&skills).expect("mkdir");
    band_test::copy_dir(&repo().join("skills/text"), &skills.join("text"));
    sleepy_skill(&skills, b);
    let probe = skills.join("probe");
    fs_err::write(
        probe.join("scripts/ticks.sh"),
        "#!/bin/sh\necho 'step one' >&2\necho 'step two' >&2\necho '{\"greeting\":\"done\"}' > \"$OUTPUT_PATH\"\n",
    )
    .expect("write");
    for side in ["input", "output"] {
        fs_err::copy(
            probe.join(format!("schemas/{side}/sleepy.json")),
            probe.join(format!("schemas/{side}/ticks.json")),
        )
        .expect("copy");
    }
    skills
}

/// One client's run: its report, once the cancelled run (the `nth` of probe/sleepy in the
/// ledger) is seen gone while its session is still open.
fn agent(mut cmd: Command, b: &Band, dir: &Path, nth: usize, what: &str) -> Value {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("client");
    // A hang fails this test by name instead of stalling the suite.
    let _watch = band_test::kill_after(&child, std::time::Duration::from_secs(300), what);
    let mut stdin = child.stdin.take().expect("stdin");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut said = Vec::new();
    let uid: u32 = loop {
        let Some(Ok(line)) = lines.next() else {
            panic!(
                "{what}: the client ended before it cancelled:\n{}",
                said.join("\n")
            );
        };
        if let Some(u) = line.strip_prefix("cancelled uid=") {
            break u.trim().parse().expect("uid");
        }
        said.push(line);
    };
    // The rest of what it says, for a failure's message.
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    band_test::wait_until("the cancelled run recorded and gone", || {
        let recs = records(b, dir);
        let Some(r) = recs.get(nth) else { return false };
        assert_eq!(r["status"], "cancelled", "{what}: {recs:#?}");
        leftovers(r["run_id"].as_str(), uid, 0..u64::MAX).is_empty()
    });
    writeln!(stdin, "go on").expect("go on");
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let status = child.wait().expect("wait");
    let rest = rest.join().unwrap_or_default().join("\n");
    assert!(status.success(), "{what}: {status}\n{out}\n{rest}");
    let mut report: Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{what}: {e}: {out}"));
    // The script's stderr lines, as progress: band sends the last line of each chunk it gets, so
    // two lines written at once may come as one message; in order, ending with the last line.
    // The whole report goes with a failure: no progress may mean the call itself failed.
    let whole = report.to_string();
    let progress = report["progress"]["messages"].take();
    let lines: Vec<&str> = progress
        .as_array()
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        matches!(lines[..], ["step one", "step two"] | ["step two"]),
        "{what}: progress {progress}; the client's report: {whole}\n{rest}"
    );
    report["progress"]["last"] = json!(lines.last());
    assert_eq!(report["cancel"]["uid"], uid, "{what}");
    report["cancel"]
        .as_object_mut()
        .expect("cancel")
        .remove("uid");
    report
}

#[test]
fn privileged_typescript_and_python_clients_over_stdio_and_http() {
    band_test::privileged!(sandbox_missing());
    let test = "privileged_typescript_and_python_clients_over_stdio_and_http";
    let Some((node, modules)) = clients_ready(test) else {
        return;
    };
    let t = tempfile::tempdir().expect("tmp");
    let b = Band::new(band_exe(), t.path().join("data"));
    let skills = agent_skills(t.path(), &b);
    let served = Served::start_with(&b, &skills, t.path(), &[]);
    let url = format!("http://127.0.0.1:{}/mcp", served.port);
    let stdio_args = |cmd: &mut Command| {
        cmd.args(["stdio", band_exe(), "mcp", "--skills"])
            .arg(&skills)
            .arg("--workspace")
            .arg(t.path());
    };
    let python_client = |stdio: bool| {
        let mut cmd = Command::new(python());
        cmd.arg(repo().join("tests/mcp/agent.py"));
        if stdio {
            stdio_args(&mut cmd);
        } else {
            cmd.args(["http", &url]);
        }
        b.apply(&mut cmd);
        cmd.current_dir(t.path());
        cmd
    };
    let typescript_client = |stdio: bool| {
        let mut cmd = Command::new(&node);
        cmd.arg(repo().join("tests/mcp/agent.mjs"));
        if stdio {
            stdio_args(&mut cmd);
        } else {
            cmd.args(["http", &url]);
        }
        b.apply(&mut cmd);
        cmd.env("MCP_NODE_MODULES", &modules).current_dir(t.path());
        cmd
    };
    let reports = [
        (
            "python over stdio",
            agent(python_client(true), &b, t.path(), 0, "python stdio"),
        ),
        (
            "python over http",
            agent(python_client(false), &b, t.path(), 1, "python http"),
        ),
        (
            "typescript over stdio",
            agent(typescript_client(true), &b, t.path(), 2, "ts stdio"),
        ),
        (
            "typescript over http",
            agent(typescript_client(false), &b, t.path(), 3, "ts http"),
        ),
    ];
    let text_files = reports[0].1["skills_get"]["files"].clone();
    assert!(
        text_files
            .as_array()
            .is_some_and(|f| f.contains(&json!("skill://text/SKILL.md"))),
        "{text_files}"
    );
    let expected = json!({
        "tools": ["probe__sleepy", "probe__ticks", "text__count", "text__summary"],
        "ok": {"is_error": false, "structured": {"chars": 15, "lines": 1, "words": 3}},
        "bad": {"is_error": true, "headline": "input_invalid"},
        "progress": {"is_error": false, "messages": null, "last": "step two"},
        "cancel": {"cancelled": true},
        "skills_list": ["probe", "text"],
        "skills_get": {"name": "text", "files": text_files},
    });
    for (what, report) in &reports {
        assert_eq!(report, &expected, "{what}");
    }
}

/// Four clients (the Python SDK, each its own session over `band mcp --http`) send eight calls
/// each at once: all 32 are answered, each with its output. That none waited behind another's
/// run is what the runs themselves saw: each run writes its marker into a host folder the band
/// lets every run write, then waits for the markers of two peers, one of its own client and one
/// of the next (`tests/mcp/many.py`); a server that ran a client's calls, or the clients, one
/// after another would leave them waiting until their limit, and they would come back `timeout`.
#[test]
fn privileged_thirty_two_concurrent_calls_from_four_clients_over_http() {
    use std::os::unix::fs::PermissionsExt;
    band_test::privileged!(sandbox_missing());
    let test = "privileged_thirty_two_concurrent_calls_from_four_clients_over_http";
    if clients_ready(test).is_none() {
        return;
    }
    const CLIENTS: usize = 4;
    const CALLS: usize = 8;
    let t = tempfile::tempdir().expect("tmp");
    let b = Band::new(band_exe(), t.path().join("data"));
    // Not under /tmp: a band's /tmp is the run's own.
    let meet = tempfile::Builder::new()
        .prefix("band-meet-")
        .tempdir_in("/var/tmp")
        .expect("tmp");
    fs_err::set_permissions(meet.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let skills = t.path().join("skills");
    fs_err::create_dir_all(&skills).expect("mkdir");
    assert_eq!(b.run(&["init", "meet", "--script", "meet"], &skills).0, 0);
    let band_md = skills.join("meet/BAND.md");
    let text = fs_err::read_to_string(&band_md).expect("read");
    let text = text
        .replace(
            r#"cli: ["jq -r .name /band/io/input.json"]"#,
            &format!(
                "cli: [\"jq -r .name /band/io/input.json\", \"sleep 0.1\"]\n  write: [\"{}\"]",
                meet.path().display()
            ),
        )
        .replace("maxRuntimeMs: 10s", "maxRuntimeMs: 10m");
    assert!(text.contains("sleep 0.1") && text.contains("10m"), "{text}");
    fs_err::write(&band_md, text).expect("write");
    fs_err::write(
        skills.join("meet/scripts/meet.sh"),
        format!(
            r#"#!/bin/sh
set -e
set -- $(jq -r .name "$INPUT_PATH")
me=$1; shift
: > {dir}/$me
for peer in "$@"; do
  while [ ! -e {dir}/$peer ]; do sleep 0.1; done
done
echo '{{"greeting":"met"}}' > "$OUTPUT_PATH"
"#,
            dir = meet.path().display()
        ),
    )
    .expect("write");
    let served = Served::start_with(&b, &skills, t.path(), &[]);
    let url = format!("http://127.0.0.1:{}/mcp", served.port);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut cmd = Command::new(python());
            cmd.arg(repo().join("tests/mcp/many.py"))
                .args([
                    &url,
                    &c.to_string(),
                    &CLIENTS.to_string(),
                    &CALLS.to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            b.apply(&mut cmd);
            let child = cmd.spawn().expect("client");
            let watch = band_test::kill_after(
                &child,
                std::time::Duration::from_secs(900),
                &format!("client {c}"),
            );
            (child, watch)
        })
        .collect();
    let mut names = Vec::new();
    for (c, (child, _watch)) in clients.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "client {c}: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let results: Value = serde_json::from_str(stdout.trim()).expect("json");
        for r in results.as_array().expect("results") {
            assert_eq!(
                (&r["is_error"], &r["structured"]),
                (&json!(false), &json!({"greeting": "met"})),
                "client {c}: {r}"
            );
            names.push(r["name"].as_str().expect("name").to_string());
        }
    }
    names.sort();
    let mut expected: Vec<String> = (0..CLIENTS)
        .flat_map(|c| (0..CALLS).map(move |k| format!("{c}-{k}")))
        .collect();
    expected.sort();
    assert_eq!(names, expected);
    // Every run left its marker, and the ledger has 32 runs, all ok.
    let markers = fs_err::read_dir(meet.path()).expect("markers").count();
    assert_eq!(markers, CLIENTS * CALLS);
    let (_, out, _) = b.run(&["history", "--json", "--limit", "100"], t.path());
    let records: Value = serde_json::from_str(&out).expect("json");
    let ok = records
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["skill"] == "meet" && r["status"] == "ok")
        .count();
    assert_eq!(ok, CLIENTS * CALLS, "{out}");
}
