//! `band exec --target sandboxd://HOST:PORT`: the same command, under the same band, gives the
//! same exit code, stdout and stderr on a pod's band-sandboxd as on this host; `band run SKILL
//! --target sandboxd://…` the same result as on this host, within the pod's band, whatever a
//! client sends. The pod is a
//! band-sandboxd on a loopback port (beside the built band-server: `cargo build --workspace`),
//! its runs this host's; the token comes from the file `$BAND_SANDBOXD_TOKEN_FILE` names.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use band::client::sandboxd::{REQUEST_COMMAND, TOKEN_FILE_ENV};
use band_test::{band_snapshot, privileged};
use pretty_assertions::assert_eq;

use crate::common::{bin, output, sandbox_missing};

const BAND: &str = "---
band: pod
description: What the pod's commands may do.
allow:
  cli: [\"wc *\", \"sh -c *\", \"echo *\"]
  read: [\"data/**\"]
---
";

/// A band-sandboxd serving `dir` (its `pod.band.md`, `token`, and itself as the workspace): the
/// child and its gRPC address.
fn pod(dir: &Path) -> (std::process::Child, String) {
    let (child, addr, _) = pod_configured(dir, "");
    (child, addr)
}

/// [`pod`], and its log (band-sandboxd's stderr, line by line, as it comes). Its band-server's
/// DNS upstream is a dead loopback port (`dir/server.toml`): nothing leaves the machine.
fn pod_logged(dir: &Path) -> (std::process::Child, String, Log) {
    pod_configured(dir, "")
}

/// [`pod_logged`], with `config` added to its band-server's config.
fn pod_configured(dir: &Path, config: &str) -> (std::process::Child, String, Log) {
    let b = bin();
    let server = b.bin_dir().join("band-server");
    let mut cmd = Command::new(b.bin_dir().join("band-sandboxd"));
    b.apply(&mut cmd);
    fs_err::write(
        dir.join("server.toml"),
        format!("dns_upstream = [\"127.0.0.1:9\"]\n{config}"),
    )
    .unwrap();
    cmd.env("BAND_SERVER_CONFIG", dir.join("server.toml"));
    cmd.arg("--band")
        .arg(dir.join("pod.band.md"))
        .arg("--token-file")
        .arg(dir.join("token"))
        .arg("--workspace")
        .arg(dir)
        .args(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--server"])
        .arg(server)
        // Nothing of the test's own output held open by it (a reader of the test's output waits
        // for its end).
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("band-sandboxd");
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("its first line");
    let words: Vec<&str> = first.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "grpc")
        .unwrap_or_else(|| panic!("{first}"));
    let addr = words[at + 1].to_string();
    let log = Log::default();
    let kept = log.clone();
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            kept.0.lock().unwrap().push(l);
        }
    });
    (child, addr, log)
}

/// A band-sandboxd's log lines so far.
#[derive(Clone, Default)]
struct Log(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Log {
    /// The run ids of the processes it started (`process N is run RUN …`).
    fn runs(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| {
                l.split_once(" is run ")?
                    .1
                    .split_whitespace()
                    .next()
                    .map(String::from)
            })
            .collect()
    }
}

#[test]
fn privileged_exec_on_a_sandboxd_target_is_exec_on_the_host() {
    privileged!(sandboxd_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    fs_err::write(dir.join("pod.band.md"), BAND).unwrap();
    fs_err::create_dir(dir.join("data")).unwrap();
    fs_err::write(dir.join("data/words.txt"), "one two three\n").unwrap();
    write_token(&dir.join("token"), "band-it-token-0123456789\n");
    let (child, addr) = pod(dir);
    let _watch =
        band_test::kill_after(&child, std::time::Duration::from_secs(600), "band-sandboxd");
    // Stopped whatever the test's end (a failed assertion included), its runs torn down.
    let mut child = Stop(child);
    let target = format!("sandboxd://{addr}");
    let commands: [&[&str]; 4] = [
        &["wc", "-w", "data/words.txt"],
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
        // Refused inside: sh says 127, band says denied.
        &["sh", "-c", "id -u"],
        // Refused before anything runs.
        &["id", "-u"],
    ];
    for command in commands {
        let mut local = vec!["exec", "--band", "pod.band.md", "--"];
        local.extend(command);
        let mut remote = vec!["exec", "--band", "pod.band.md", "--target", &target, "--"];
        remote.extend(command);
        let here = output(&local, dir);
        let there = bin()
            .env(TOKEN_FILE_ENV, dir.join("token"))
            .output(&remote, dir);
        assert_eq!(here.parts(), there.parts(), "{command:?}");
    }
    let mut shown = vec!["exec", "--band", "pod.band.md", "--target", &target, "--"];
    shown.extend(["sh", "-c", "echo out; echo err >&2; exit 3"]);
    band_snapshot!(
        bin()
            .env(TOKEN_FILE_ENV, dir.join("token"))
            .output(&shown, dir),
        "exec_on_sandboxd"
    );
    // No token: a clear error, nothing sent (the port is never dialled).
    band_snapshot!(
        bin().env_remove(TOKEN_FILE_ENV).output(
            &[
                "exec",
                "--band",
                "pod.band.md",
                "--target",
                "sandboxd://127.0.0.1:9",
                "--",
                "wc",
                "-w",
                "data/words.txt"
            ],
            dir
        ),
        "exec_on_sandboxd_without_a_token"
    );
    // A wrong token: refused by the pod.
    write_token(&dir.join("wrong"), "not-the-token-0123456789\n");
    let (code, _, stderr) = bin()
        .env(TOKEN_FILE_ENV, dir.join("wrong"))
        .run(&shown, dir);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("a token is required"), "{stderr}");
    let _ = Command::new("kill").arg(child.0.id().to_string()).status();
    assert!(child.0.wait().unwrap().success());
}

/// A band-sandboxd killed when the test ends, however it ends.
struct Stop(std::process::Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python() -> String {
    std::env::var("BAND_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// `deploy/kubernetes/` against Kubernetes' schemas (PyPI `kubernetes-validate`), band's
/// transcription of agent-sandbox's kinds (`tests/sandboxd/agent-sandbox-v1beta1.json`) and, when
/// `BAND_TEST_AGENT_SANDBOX_CRDS` names a copy of agent-sandbox's `k8s/crds/`, the upstream CRDs;
/// each check shown to refuse a broken copy; and the ConfigMap's BAND.md lints clean.
#[test]
fn the_manifests_match_kubernetes_and_the_agent_sandbox_crds() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let has = Command::new(python())
        .args(["-c", "import kubernetes_validate, jsonschema, yaml"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if band_test::skip(
        band_test::test_name!(),
        (!has).then(|| {
            format!(
                "{} has no kubernetes-validate (pip install kubernetes-validate; set BAND_TEST_PYTHON)",
                python()
            )
        }),
    ) {
        return;
    }
    let out = Command::new(python())
        .arg(repo.join("tests/sandboxd/validate_manifests.py"))
        .arg(repo.join("deploy/kubernetes"))
        .arg(repo.join("tests/sandboxd/agent-sandbox-v1beta1.json"))
        .args(std::env::var_os("BAND_TEST_AGENT_SANDBOX_CRDS"))
        .output()
        .expect("python");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.ends_with("all ok\n"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The pod's band, as the ConfigMap carries it.
    let cm: serde_json::Value = yaml_serde::from_str(
        &fs_err::read_to_string(repo.join("deploy/kubernetes/band-configmap.yaml")).unwrap(),
    )
    .unwrap();
    let t = tempfile::tempdir().unwrap();
    fs_err::write(
        t.path().join("BAND.md"),
        cm["data"]["BAND.md"].as_str().unwrap(),
    )
    .unwrap();
    band_snapshot!(output(&["lint", "BAND.md"], t.path()), "pod_band_lints");
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs_err::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs_err::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // After the command's `(name)`: state, then the parent's pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// `band exec --target sandboxd://` shows the run's output as the pod streams it (the first line
/// arrives while the run still waits on its stdin, which nothing closes), and Ctrl-C (SIGINT to
/// band) becomes SIGINT to the run: it ends as a script killed by SIGINT does on the host (130),
/// and the pod's band-server for it is gone.
#[test]
fn privileged_exec_on_a_sandboxd_target_streams_and_ctrl_c_signals_the_run() {
    privileged!(sandboxd_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    fs_err::write(dir.join("pod.band.md"), BAND).unwrap();
    write_token(&dir.join("token"), "band-it-token-0123456789\n");
    let (child, addr) = pod(dir);
    let _watch =
        band_test::kill_after(&child, std::time::Duration::from_secs(600), "band-sandboxd");
    let mut pod_child = Stop(child);
    let b = bin();
    let mut cmd = Command::new(b.bin_dir().join("band"));
    b.apply(&mut cmd);
    let mut band = cmd
        .current_dir(dir)
        .env(TOKEN_FILE_ENV, dir.join("token"))
        .args(["exec", "--band", "pod.band.md", "--target"])
        .arg(format!("sandboxd://{addr}"))
        .args(["--", "sh", "-c", "echo first; read x; echo never"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _band_watch = band_test::kill_after(&band, std::time::Duration::from_secs(300), "band");
    let mut out = std::io::BufReader::new(band.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first, "first\n");
    // The run is under way: its band-server is the pod's child.
    assert_eq!(children(pod_child.0.id()).len(), 1);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(band.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = band.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut band.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!((status.code(), rest.as_str()), (Some(130), ""), "{err}");
    band_test::wait_until("the pod's run to be torn down", || {
        children(pod_child.0.id()).is_empty()
    });
    let _ = Command::new("kill")
        .arg(pod_child.0.id().to_string())
        .status();
    assert!(pod_child.0.wait().unwrap().success());
}

/// The pod's band for the skill tests: the ceiling of every skill a client sends.
const SKILL_POD_BAND: &str = "---
band: pod
description: What a skill run on the pod may do.
allow:
  cli: [\"jq *\", \"wc *\", \"sleep *\"]
  read: [\"data/**\"]
  write: [\"out/**\"]
deny:
  read: [\"data/secret.txt\"]
---
";

/// The skill `demo/hello`: counts the words of `data/words.txt`, says whether it can see
/// `data/secret.txt`, writes `out/note.txt`, fails (3) for the name `fail` and waits (a
/// `sleep`) for the name `wait`; for `big` its output is 128 KiB.
const SKILL_SCRIPT: &str = r#"#!/bin/sh
set -eu
name=$(jq -r .name "$INPUT_PATH")
words=$(wc -w < data/words.txt)
echo "hello $name"
if [ -e data/secret.txt ]; then IFS= read -r s < data/secret.txt; echo "secret: $s"; else echo "secret: not there"; fi
echo "$name" > out/note.txt
printf '{"greeting":"Hello, %s! (%s words)"}\n' "$name" $words > "$OUTPUT_PATH"
[ "$name" != fail ] || exit 3
[ "$name" != wait ] || sleep 300
if [ "$name" = big ]; then
  s=x; i=0; while [ $i -lt 17 ]; do s="$s$s"; i=$((i+1)); done
  printf '{"greeting":"%s"}\n' "$s" > "$OUTPUT_PATH"
fi
"#;

const SKILL_BAND: &str = "---
band: demo
description: Counts words.
allow:
  cli: [\"jq -r .name /band/io/input.json\", \"wc -w\", \"sleep 300\"]
  read: [\"data/**\"]
  write: [\"out/**\"]
deny:
  read: [\"data/secret.txt\"]
---
";

/// `text` without its timings: band's last line (`band: ok (92 ms: setup 15 ms, run 77 ms)`)
/// without the parenthesis.
fn untimed(text: &str) -> String {
    text.lines()
        .map(|l| match l.split_once(" (") {
            Some((head, rest)) if l.starts_with("band: ") && rest.ends_with("ms)") => head,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A folder that is both the client's project and the pod's workspace: the pod's band, its
/// token, `data/`, and the skill `demo` in `skills/` with `band` as its BAND.md.
fn skill_project(dir: &Path, band: &str) {
    fs_err::write(dir.join("pod.band.md"), SKILL_POD_BAND).unwrap();
    write_token(&dir.join("token"), "band-it-token-0123456789\n");
    fs_err::create_dir_all(dir.join("data")).unwrap();
    fs_err::create_dir_all(dir.join("out")).unwrap();
    fs_err::write(dir.join("data/words.txt"), "one two three\n").unwrap();
    fs_err::write(dir.join("data/secret.txt"), "the pod's own\n").unwrap();
    let skills = dir.join("skills");
    fs_err::create_dir_all(&skills).unwrap();
    assert_eq!(bin().run(&["init", "demo"], &skills).0, 0);
    crate::common::write_script(&skills.join("demo/scripts/hello.sh"), SKILL_SCRIPT);
    fs_err::write(skills.join("demo/BAND.md"), band).unwrap();
}

/// Why a band-sandboxd test cannot run here, if it cannot: the sandbox, or band-sandboxd not
/// built. For `privileged!`, which returns from the test itself.
fn sandboxd_missing() -> Option<String> {
    let sandboxd = bin().bin_dir().join("band-sandboxd");
    sandbox_missing().or_else(|| {
        (!sandboxd.exists()).then(|| {
            format!(
                "{} is missing (cargo build --workspace)",
                sandboxd.display()
            )
        })
    })
}

/// `band run SKILL --target sandboxd://`: the same skill and input give the same stdout, stderr,
/// output JSON and exit code as on this host (the pod's workspace is this folder), and what the
/// run writes lands in the pod's workspace. A skill whose band asks for more than the pod's band
/// allows (a command, a host, a folder) is refused naming the pod's band file, line and rule,
/// and nothing runs.
#[test]
fn privileged_run_on_a_sandboxd_target_is_run_on_the_host_within_the_pods_band() {
    privileged!(sandboxd_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    skill_project(dir, SKILL_BAND);
    let (child, addr, log) = pod_logged(dir);
    let _watch =
        band_test::kill_after(&child, std::time::Duration::from_secs(600), "band-sandboxd");
    let mut child = Stop(child);
    let target = format!("sandboxd://{addr}");
    let remote = || bin().env(TOKEN_FILE_ENV, dir.join("token"));
    for name in ["World", "fail", "big"] {
        let input = format!("--name={name}");
        let args = ["run", "--skills", "skills", "demo/hello", input.as_str()];
        let mut there_args = args.to_vec();
        there_args.extend(["--target", &target]);
        let here = output(&args, dir);
        fs_err::remove_file(dir.join("out/note.txt")).unwrap();
        let there = remote().output(&there_args, dir);
        // Written by the pod's run, into its workspace.
        assert_eq!(
            fs_err::read_to_string(dir.join("out/note.txt")).unwrap(),
            format!("{name}\n")
        );
        let untimed = |o: band_test::Output| {
            let (code, out, err) = o.parts();
            (code, out, untimed(&err))
        };
        assert_eq!(untimed(here), untimed(there), "{name}");
        let mut json = vec!["run", "--json"];
        json.extend(&args[1..]);
        let here: serde_json::Value =
            serde_json::from_str(&output(&json, dir).stdout).expect("json");
        let mut there_json = json.clone();
        there_json.extend(["--target", &target]);
        let there: serde_json::Value =
            serde_json::from_str(&remote().output(&there_json, dir).stdout).expect("json");
        for field in ["status", "exit_code", "output", "stdout"] {
            assert_eq!(here[field], there[field], "{name}: {field}");
        }
    }
    band_snapshot!(
        remote().output(
            &[
                "run",
                "--skills",
                "skills",
                "demo/hello",
                "--name=World",
                "--target",
                &target
            ],
            dir
        ),
        "run_on_sandboxd"
    );
    let started = log.runs().len();
    // A wrong token: refused by the pod, nothing sent.
    write_token(&dir.join("wrong"), "not-the-token-0123456789\n");
    let (code, _, stderr) = bin().env(TOKEN_FILE_ENV, dir.join("wrong")).run(
        &[
            "run",
            "--skills",
            "skills",
            "demo/hello",
            "--name=World",
            "--target",
            &target,
        ],
        dir,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("a token is required"), "{stderr}");
    // More than the pod allows: refused by the pod, naming its band's line; nothing runs.
    for (what, band) in [
        (
            "cli",
            SKILL_BAND.replace("\"sleep 300\"]", "\"sleep 300\", \"id -u\"]"),
        ),
        (
            "net",
            SKILL_BAND.replace("  read:", "  net: [\"a.test:443\"]\n  read:"),
        ),
        ("read", SKILL_BAND.replace("[\"data/**\"]", "[\"**\"]")),
    ] {
        fs_err::write(dir.join("skills/demo/BAND.md"), band).unwrap();
        band_snapshot!(
            remote().output(
                &[
                    "run",
                    "--skills",
                    "skills",
                    "demo/hello",
                    "--name=World",
                    "--target",
                    &target
                ],
                dir
            ),
            format!("run_on_sandboxd_refused_{what}")
        );
    }
    assert_eq!(log.runs().len(), started, "a refused skill started a run");
    let _ = Command::new("kill").arg(child.0.id().to_string()).status();
    assert!(child.0.wait().unwrap().success());
}

/// Start [`REQUEST_COMMAND`] on the pod at `addr` with `stdin` as the request, as any client can,
/// band or not (the SDK's own gRPC, a script): the exit code, stdout and stderr streamed.
fn raw_request(addr: &str, stdin: &[u8]) -> (i32, String, String) {
    use band::client::sandboxd::pb;
    use pb::start_response::Event;
    use pb::write_stdin_request::Payload;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let bearer: tonic::metadata::MetadataValue<tonic::metadata::Ascii> =
            "Bearer band-it-token-0123456789".parse().unwrap();
        let mut client = pb::process_service_client::ProcessServiceClient::with_interceptor(
            channel,
            move |mut r: tonic::Request<()>| {
                r.metadata_mut().insert("authorization", bearer.clone());
                Ok(r)
            },
        );
        let mut stream = client
            .start(pb::StartRequest {
                config: Some(pb::ProcessConfig {
                    command: vec![REQUEST_COMMAND.into()],
                    env_vars: Default::default(),
                    cwd: None,
                }),
                pty: None,
            })
            .await
            .unwrap()
            .into_inner();
        let (mut out, mut err, mut code) = (Vec::new(), Vec::new(), None);
        while let Some(m) = stream.message().await.unwrap() {
            match m.event {
                Some(Event::Init(i)) => {
                    let write = |payload| pb::WriteStdinRequest {
                        process_id: i.process_id,
                        payload: Some(payload),
                    };
                    // A refused request's process is gone: the rest is not found.
                    let mut sent = true;
                    for chunk in stdin.chunks(1 << 20) {
                        sent = client
                            .write_stdin(write(Payload::Input(chunk.to_vec())))
                            .await
                            .is_ok();
                        if !sent {
                            break;
                        }
                    }
                    if sent {
                        let _ = client.write_stdin(write(Payload::Eof(()))).await;
                    }
                }
                Some(Event::Stdout(b)) => out.extend(b),
                Some(Event::Stderr(b)) => err.extend(b),
                Some(Event::Exit(x)) => code = Some(x.exit_code),
                None => {}
            }
        }
        (
            code.expect("an exit"),
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    })
}

/// The request `band run` makes for `demo/hello` with `name` in `dir` (as it sends it).
fn request_of(dir: &Path, name: &str) -> serde_json::Value {
    use band::client::outcome::{Preparation, RunSpec};
    let spec = RunSpec {
        skill_root: dir.join("skills/demo"),
        script: "hello".into(),
        raw_input: serde_json::json!({ "name": name }),
        workspace: dir.to_path_buf(),
        target: Some("host".into()),
        trace: false,
        allow_system_workspace: true,
        require_lock: false,
        record_io: false,
        schemas: None,
    };
    let config = band::client::config::UserConfig::default();
    match band::client::pipeline::prepare(&spec, &config, 0, &mut |_| {}) {
        Ok(Preparation::Ready(p)) => serde_json::to_value(&p.request).unwrap(),
        _ => panic!("the request of demo/hello"),
    }
}

/// Whatever a client sends, the pod's band holds: a request (sent raw, as any client can)
/// that claims a wider policy than its bundle's band is refused naming the pod's band; one that
/// drops the band's deny, brings its own copy of a file the pod denies, claims a trust tier and
/// a signature and the run id of another run runs without the file (probed from inside: the
/// skill's band without the deny sees it on this host); a narrower layer labelled `pod` from the
/// client is refused; a malformed or oversized request is refused. None of these starts a run.
#[test]
fn privileged_a_forged_request_on_a_sandboxd_target_stays_inside_the_pods_band() {
    privileged!(sandboxd_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    // The skill's own band does not deny data/secret.txt; the pod's does.
    let open = SKILL_BAND.replace("deny:\n  read: [\"data/secret.txt\"]\n", "");
    assert_ne!(open, SKILL_BAND);
    skill_project(dir, &open);
    // A small disk cap: band-server's request cap (4/3 of it, the input cap and 16 MiB) is
    // about 17 MiB.
    let (child, addr, log) = pod_configured(dir, "[caps]\ndisk = \"1m\"\ninput = \"64k\"\n");
    let _watch =
        band_test::kill_after(&child, std::time::Duration::from_secs(600), "band-sandboxd");
    let mut child = Stop(child);
    // On this host the skill's band admits the file.
    let here = band_test::Output::parts(output(
        &[
            "run",
            "--json",
            "--skills",
            "skills",
            "demo/hello",
            "--name=probe",
        ],
        dir,
    ));
    let here: serde_json::Value = serde_json::from_str(&here.1).expect("json");
    assert!(
        here["stdout"]
            .as_str()
            .unwrap()
            .contains("secret: the pod's own"),
        "{here}"
    );
    let request = request_of(dir, "probe");
    // Wider than the pod: refused, nothing runs.
    let mut wider = request.clone();
    wider["policy"]["allow"]["cli"]
        .as_array_mut()
        .unwrap()
        .push("cat *".into());
    let (code, out, err) = raw_request(&addr, wider.to_string().as_bytes());
    assert_eq!((code, out.as_str()), (8, ""), "{err}");
    assert!(
        err.contains(
            "refused: the band's allow.cli `cat *` is refused by the pod policy's allow.cli ceiling"
        ) && err.contains("pod.band.md:5"),
        "{err}"
    );
    assert!(log.runs().is_empty());
    // Forged: no deny, its own copy of the denied file, a tier, a signature, another run's id.
    let mut forged = request.clone();
    forged["policy"]["deny"] = serde_json::json!({});
    forged["workspace"] = serde_json::json!([
        {"path": "data/secret.txt", "mode": 420, "data": "ZnJvbSB0aGUgY2xpZW50Cg=="}
    ]);
    forged["tier"] = "trusted".into();
    forged["signed"] = serde_json::json!({"lock": "tier: trusted\n", "sig": "forged"});
    forged["run_id"] = "0123456789abcdef".into();
    let (code, out, err) = raw_request(&addr, forged.to_string().as_bytes());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("hello probe\nsecret: not there\n"), "{out}");
    let runs = log.runs();
    assert_eq!(runs.len(), 1);
    assert_ne!(runs[0], "0123456789abcdef");
    // A `pod` layer of the client's: refused by band-server (only `user` and `session` are
    // a client's to send).
    let mut labelled = request.clone();
    labelled["narrowing"] = serde_json::json!([
        {"label": "pod", "source": "pod.band.md", "text": "---\nallow: {}\n---\n"}
    ]);
    let (code, _, err) = raw_request(&addr, labelled.to_string().as_bytes());
    assert_eq!(code, 8, "{err}");
    assert!(err.contains("unknown narrower layer \"pod\""), "{err}");
    let started = log.runs().len();
    // Malformed, and over the cap: refused before anything starts.
    let (code, _, err) = raw_request(&addr, b"{\"not\": \"a request\"}");
    assert_eq!(code, 8, "{err}");
    assert!(err.contains("malformed request"), "{err}");
    let (code, _, err) = raw_request(&addr, &vec![b' '; 18 << 20]);
    assert_eq!(code, 8, "{err}");
    assert!(err.contains("the request is larger than"), "{err}");
    assert_eq!(log.runs().len(), started);
    assert!(children(child.0.id()).is_empty());
    let _ = Command::new("kill").arg(child.0.id().to_string()).status();
    assert!(child.0.wait().unwrap().success());
}

/// The cgroup folders of run `run` in the machine's hierarchies (v1: one per controller).
fn run_cgroups(run: &str) -> Vec<std::path::PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut at = vec![root.join("band").join(run)];
    for e in fs_err::read_dir(root).unwrap().flatten() {
        at.push(e.path().join("band").join(run));
    }
    at.into_iter().filter(|p| p.exists()).collect()
}

/// The processes in run `run`'s cgroup whose command is `comm`.
fn run_processes(run: &str, comm: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs_err::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cgroup = fs_err::read_to_string(format!("/proc/{p}/cgroup")).unwrap_or_default();
        let name = fs_err::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
        if cgroup.contains(run) && name.trim() == comm {
            out.push(p);
        }
    }
    out
}

/// `band run --target sandboxd://` killed (SIGKILL) while its skill runs on the pod: the pod
/// cancels the run, and its band-server, processes, cgroups and run folder are gone.
#[test]
fn privileged_a_killed_client_of_a_skill_on_a_sandboxd_target_leaves_nothing() {
    privileged!(sandboxd_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    skill_project(dir, SKILL_BAND);
    let (child, addr, log) = pod_logged(dir);
    let _watch =
        band_test::kill_after(&child, std::time::Duration::from_secs(600), "band-sandboxd");
    let mut pod_child = Stop(child);
    let b = bin();
    let mut cmd = Command::new(b.bin_dir().join("band"));
    b.apply(&mut cmd);
    let mut band = cmd
        .current_dir(dir)
        .env(TOKEN_FILE_ENV, dir.join("token"))
        .args([
            "run",
            "--skills",
            "skills",
            "demo/hello",
            "--name=wait",
            "--target",
        ])
        .arg(format!("sandboxd://{addr}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _band_watch = band_test::kill_after(&band, std::time::Duration::from_secs(300), "band");
    band_test::wait_until("the skill's sleep to run on the pod", || {
        log.runs()
            .first()
            .is_some_and(|r| !run_processes(r, "sleep").is_empty())
    });
    let run = log.runs()[0].clone();
    assert!(!run_cgroups(&run).is_empty());
    band.kill().unwrap();
    band.wait().unwrap();
    band_test::wait_until("the pod's run to be torn down", || {
        children(pod_child.0.id()).is_empty()
    });
    assert_eq!(run_processes(&run, "sleep"), Vec::<u32>::new());
    assert_eq!(run_cgroups(&run), Vec::<std::path::PathBuf>::new());
    let runs = Path::new(band_test::STATE_DIR).join("runs");
    let left: Vec<String> = fs_err::read_dir(&runs)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(&run))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(left, Vec::<String>::new());
    let _ = Command::new("kill")
        .arg(pod_child.0.id().to_string())
        .status();
    assert!(pod_child.0.wait().unwrap().success());
}

/// A token file as a user keeps one: readable by its owner only (band refuses any other).
fn write_token(path: &std::path::Path, token: &str) {
    use std::os::unix::fs::PermissionsExt;
    fs_err::write(path, token).unwrap();
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}
