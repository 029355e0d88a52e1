//! The host target's warm band-server (user config `warm = true`, issue 17): runs after the
//! first are served by a forked child of `band-server serve --host`, which stands aside for
//! another build of band-server; once it has served a request, by a spare sandbox of that
//! request's shape, built ahead (`band-server`'s `run::spare`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{bin, sandbox_missing};

pub(crate) const HOST_DIR: &str = "/run/band-serve/host";

/// The host has one warm server: the tests that start one take turns. The load tests take it
/// too: 64 runs at once fill the uid pool, and a run that finds it full sends a waiting spare
/// away, whichever server's, where a warm test counts on its spare.
pub(crate) static ONE_SERVER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Kill the host's warm server, if one runs, and wait for it to go.
pub(crate) fn no_warm_server() {
    if let Some(pid) = server_pid().filter(|p| alive(*p)) {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
        wait_for("the earlier warm server to exit", || !alive(pid));
    }
}

/// How the warm server served run `id` ("built for it", "a spare"), if it did: its child logs
/// that before the result goes out.
fn served(id: &str) -> Option<String> {
    let text = fs_err::read_to_string(Path::new(HOST_DIR).join("serve.log")).unwrap_or_default();
    let needle = format!("run {id} served by the warm server (");
    let line = text.lines().find(|l| l.contains(&needle))?;
    let rest = &line[line.find(&needle)? + needle.len()..];
    Some(rest.split(';').next()?.to_string())
}

/// The pid of the warm child that holds spare `spare`, from the line that announced it.
fn spare_pid(spare: &str) -> Option<i32> {
    let text = fs_err::read_to_string(Path::new(HOST_DIR).join("serve.log")).unwrap_or_default();
    let needle = format!("spare {spare} ready for ");
    let line = text.lines().find(|l| l.contains(&needle))?;
    line.split("(pid ")
        .nth(1)?
        .split(')')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// The idle marks on the host's uid locks (`layers::identity::idle` in band-server).
fn idle_marks() -> Vec<String> {
    fs_err::read_dir("/run/band-uids")
        .map(|d| {
            d.flatten()
                .filter_map(|e| fs_err::read_to_string(e.path()).ok())
                .filter(|t| t.starts_with("idle "))
                .collect()
        })
        .unwrap_or_default()
}

/// In the warm server's log, from the first line that contains `from` on: the word after `word`
/// in the first line that contains `find`.
fn logged_after(from: &str, find: &str, word: &str) -> Option<String> {
    let text = fs_err::read_to_string(Path::new(HOST_DIR).join("serve.log")).unwrap_or_default();
    let line = text
        .lines()
        .skip_while(|l| !l.contains(from))
        .find(|l| l.contains(find))?;
    line.split_whitespace()
        .skip_while(|w| *w != word)
        .nth(1)
        .map(String::from)
}

/// The run id of the spare announced for `skill` after run `id` was served, once there is one.
fn spare_after(id: &str, skill: &str) -> Option<String> {
    logged_after(
        &format!("run {id} served by the warm server ("),
        &format!(" ready for {skill}/"),
        "spare",
    )
}

/// A skill whose script reports, from inside the sandbox, who it runs as and what it may do
/// (`sandbox`), and what of the run is its own (`own`): its input, a workspace file, a secret,
/// and whether an earlier run's files are there.
fn probe_skill(root: &Path) -> PathBuf {
    let input =
        r#"{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}"#;
    let script = r#"#!/bin/bash
field() { while read -r k v; do [ "$k" = "$1:" ] && { echo "${v%%[[:space:]]*}"; return; }; done < /proc/self/status; }
if cat /etc/shadow >/dev/null 2>&1; then shadow=readable; else shadow=denied; fi
if (exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null; then net=open; else net=closed; fi
if echo x > /usr/bin/warm-probe 2>/dev/null; then usr=writable; else usr=read-only; fi
if read -r _ < /proc/cmdline; then cmdline=shown; else cmdline=covered; fi
if echo x > /proc/cmdline 2>/dev/null; then cmdline="$cmdline,writable"; fi
tmp=fresh; [ -e /tmp/mark ] && tmp=used; echo x > /tmp/mark
out=fresh; [ -e /workspace/out/r.txt ] && out=used; mkdir -p /workspace/out; echo x > /workspace/out/r.txt
read -r in < /workspace/in.txt
# Input n = -1: stay (the test looks at the spare while it serves).
case "$(cat "$INPUT_PATH")" in *'"n":-1'*) exec sleep 1000 ;; esac
printf '{"sandbox":{"nnp":"%s","seccomp":"%s","capeff":"%s","shadow":"%s","net":"%s","usr":"%s","cmdline":"%s","tmp":"%s","out":"%s"},"uid":%s,"own":{"in":"%s","token":"%s","input":%s}}\n' \
  "$(field NoNewPrivs)" "$(field Seccomp)" "$(field CapEff)" "$shadow" "$net" "$usr" "$cmdline" "$tmp" "$out" "$(field Uid)" \
  "$in" "$WARM_TOKEN" "$(cat "$INPUT_PATH")" > "$OUTPUT_PATH"
"#;
    band_test::SkillBuilder::new("warmprobe")
        .description("Probes the sandbox.")
        .body("Used by the warm server test.\n")
        .band("description: Reads in.txt, writes out/, uses a secret.\nallow:\n  read: [in.txt]\n  write: [\"out/**\"]\nenv:\n  secrets: [WARM_TOKEN]\n")
        .input_schema("probe", input)
        .script("probe.sh", script)
        .input_schema("other", input)
        .script("other.sh", script)
        .write(root)
}

/// The warm server's pid, from its pid file.
pub(crate) fn server_pid() -> Option<i32> {
    fs_err::read_to_string(Path::new(HOST_DIR).join("serve.pid"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub(crate) fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Wait until `ok` ([`band_test::wait_until`]).
fn wait_for(what: &str, ok: impl Fn() -> bool) {
    band_test::wait_until(what, ok);
}

/// The sockets the host's warm servers listen on.
fn sockets() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs_err::read_dir(HOST_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("server-"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A copy of band-server and its helpers in `dir/bin` (a warm server serves only its own file's
/// build): the folder.
fn copied_server(band: &band_test::Band, dir: &Path) -> PathBuf {
    let bins = dir.join("bin");
    fs_err::create_dir_all(&bins).expect("mkdir");
    for b in ["band-server", "band-jail", "band-shim"] {
        fs_err::copy(band.bin_dir().join(b), bins.join(b)).expect("copy");
    }
    bins
}

/// Stops the warm server this test started, whatever the test's end.
pub(crate) struct StopServer;

impl Drop for StopServer {
    fn drop(&mut self) {
        if let Some(pid) = server_pid() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

#[test]
fn privileged_a_warm_server_serves_the_next_runs_and_stands_aside_for_another_build() {
    band_test::privileged!(sandbox_missing());
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let _stop = StopServer;
    // No warm server of an earlier run of this test.
    no_warm_server();
    let t = tempfile::tempdir().expect("tempdir");
    let band = bin();
    // band-server and its helpers copied: the test installs another build over it later.
    let bins = copied_server(&band, t.path());
    let server = bins.join("band-server");
    let config = t.path().join("config.toml");
    fs_err::write(&config, "warm = true\n").expect("write");
    // The config decides (the tests' environment says BAND_WARM=0).
    let band = band
        .env("BAND_SERVER", &server)
        .env("BAND_CONFIG", &config)
        .env_remove("BAND_WARM");
    let skill = probe_skill(t.path());
    let work = t.path().join("work");
    fs_err::create_dir_all(&work).expect("mkdir");
    let runs = std::cell::Cell::new(0u32);
    // A run of `script` with its own input, workspace file and secret; the sandbox it saw, its
    // uid, and its run id. What was its own is checked here.
    let run_script = |band: &band_test::Band, script: &str| {
        let n = runs.get() + 1;
        runs.set(n);
        let _ = fs_err::remove_dir_all(work.join("out"));
        fs_err::write(work.join("in.txt"), format!("file {n}\n")).expect("write");
        let (code, out, err) = band.clone().env("WARM_TOKEN", format!("token {n}")).run(
            &[
                "run",
                "--json",
                &format!("{}/{script}", skill.display()),
                "--input",
                &format!("{{\"n\":{n}}}"),
            ],
            &work,
        );
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).expect("json");
        let id = v["run_id"].as_str().expect("run_id").to_string();
        let output = &v["output"];
        assert_eq!(
            output["own"],
            serde_json::json!({"in": format!("file {n}"), "token": format!("token {n}"), "input": {"n": n}}),
            "run {id} did not see its own input, file and secret"
        );
        assert_eq!(
            fs_err::read_to_string(work.join("out/r.txt"))
                .ok()
                .as_deref(),
            Some("x\n"),
            "run {id}'s file did not come back"
        );
        let uid = output["uid"].as_u64().expect("uid");
        assert!(uid > 0, "{output}");
        (id, output["sandbox"].clone())
    };
    let run = || run_script(&band, "probe");
    let served_warm = |id: &str| served(id).is_some();
    // Has a spare been announced since run `id` was served (the spare built after it)?
    let spare_ready = |id: &str| spare_after(id, "warmprobe").is_some();
    let before = sockets();

    // The first run has no warm server: band-server of its own, then one is started.
    let (first, cold) = run();
    assert!(!served_warm(&first));
    wait_for("a warm server's socket", || {
        sockets().iter().any(|s| !before.contains(s))
    });
    wait_for("the warm server's pid file", || {
        server_pid().is_some_and(alive)
    });
    let pid = server_pid().expect("the warm server's pid file");

    // The next run goes to it, built for it; then a spare of its shape serves each next one.
    // The sandbox is the same one seen from inside, and each run saw only its own.
    let (id, warm) = run();
    assert_eq!(served(&id).as_deref(), Some("built for it"));
    assert_eq!(warm, cold, "the sandbox differs when served warm");
    let mut last = id;
    for _ in 0..3 {
        wait_for("a spare", || spare_ready(&last));
        let (id, spare) = run();
        assert_eq!(served(&id).as_deref(), Some("a spare"), "run {id}");
        assert_eq!(spare, cold, "the sandbox differs when served by a spare");
        last = id;
    }
    // A spare that serves no longer says it is idle (a run of another server would ask it to
    // leave, and look no further). Seen while its run goes on (the script stays): that warm child
    // then marks nothing else, as it does for the spare it builds after the result.
    wait_for("a spare", || spare_ready(&last));
    let spare = spare_after(&last, "warmprobe").expect("the spare's announcement");
    let holder = spare_pid(&spare).unwrap_or_else(|| panic!("spare {spare}: no pid in the log"));
    let marked = || {
        idle_marks()
            .iter()
            .any(|m| m.starts_with(&format!("idle {holder} ")))
    };
    assert!(marked(), "the waiting spare {spare} is not marked idle");
    let mut staying = band
        .clone()
        .env("WARM_TOKEN", "token")
        .command(
            &[
                "run",
                "--json",
                &format!("{}/probe", skill.display()),
                "--input",
                "{\"n\":-1}",
            ],
            &work,
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("band run");
    wait_for("the serving spare's idle mark to be cleared", || !marked());
    // … while the run goes on, not by its end (its lease's release clears the lock file too).
    assert!(
        matches!(staying.try_wait(), Ok(None)),
        "the run ended before its spare's idle mark was cleared"
    );
    let _ = staying.kill();
    let _ = staying.wait();
    // That run, cancelled, is the one the next spare is built after.
    let served_by_spare = || {
        logged_after(
            &format!("spare {spare} ready for "),
            &format!("served by the warm server (a spare; pid {holder},"),
            "run",
        )
    };
    wait_for("the cancelled run's end", || served_by_spare().is_some());
    last = served_by_spare().expect("the cancelled run");

    assert_eq!(cold["nnp"], "1", "{cold}");
    assert_eq!(cold["seccomp"], "2", "{cold}");
    assert_eq!(cold["capeff"], "0000000000000000", "{cold}");
    assert_eq!(
        (&cold["shadow"], &cold["net"], &cold["usr"]),
        (
            &Value::from("denied"),
            &Value::from("closed"),
            &Value::from("read-only")
        )
    );
    // The host's kernel command line is covered (empty, read-only) in every run, those a spare
    // served included (the covers are made once bubblewrap has built the sandbox).
    assert_eq!(cold["cmdline"], "covered", "{cold}");
    assert_eq!(
        (&cold["tmp"], &cold["out"]),
        (&Value::from("fresh"), &Value::from("fresh"))
    );

    // A connection that brings nothing (band drops one it made on a guess when the run is
    // refused before its request) is dropped unread while a spare waits: the server waits for
    // its shape line to know which spare it is for. The spare serves the next run.
    wait_for("a spare", || spare_ready(&last));
    {
        let socket = sockets()
            .into_iter()
            .find(|s| !before.contains(s))
            .expect("the warm server's socket");
        let conn = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
        drop(conn);
    }
    let (id, spare) = run();
    assert_eq!(served(&id).as_deref(), Some("a spare"), "run {id}");
    assert_eq!(spare, cold);
    last = id;

    // Another script (another shape): no spare of its shape, so it runs as its own, and the
    // probe's spare stays; then a spare of each serves each in turn, every run seeing only its
    // own input, file and secret (`run_script`).
    wait_for("a spare", || spare_ready(&last));
    let (id, other) = run_script(&band, "other");
    assert_eq!(served(&id).as_deref(), Some("built for it"), "run {id}");
    assert_eq!(other, cold);
    // The spare of `script` announced since run `after` was served.
    let spare_of = |after: &str, script: &str| {
        logged_after(
            &format!("run {after} served"),
            &format!(" ready for warmprobe/{script} "),
            "spare",
        )
    };
    let mut last_of = std::collections::BTreeMap::from([("probe", last), ("other", id)]);
    for script in ["probe", "other", "probe", "other"] {
        let after = last_of[script].clone();
        wait_for("a spare", || spare_of(&after, script).is_some());
        let (id, seen) = run_script(&band, script);
        assert_eq!(
            served(&id).as_deref(),
            Some("a spare"),
            "{script}: run {id}"
        );
        assert_eq!(seen, cold, "{script}: the sandbox differs");
        last_of.insert(script, id);
    }
    wait_for("a spare", || spare_of(&last_of["probe"], "probe").is_some());
    let probe_spare_dir = Path::new(band_test::STATE_DIR)
        .join("runs")
        .join(spare_of(&last_of["probe"], "probe").expect("the probe's spare"));
    assert!(probe_spare_dir.is_dir(), "{}", probe_spare_dir.display());
    let id = last_of["other"].clone();
    // The spare sandbox waits in the run's state: its run directory is there, and goes with
    // the server (below).
    wait_for("a spare", || spare_ready(&id));
    let spare_dir = Path::new(band_test::STATE_DIR)
        .join("runs")
        .join(spare_after(&id, "warmprobe").expect("the spare's run id"));
    assert!(spare_dir.is_dir(), "{} is not there", spare_dir.display());

    // Another build installed over band-server: the warm server notices and exits by itself
    // (its socket goes with it), the next run is served by a band-server of its own, and a
    // warm server of the new build starts.
    let old_socket = sockets()
        .into_iter()
        .find(|s| !before.contains(s))
        .expect("the warm server's socket");
    let next = bins.join("band-server.next");
    fs_err::copy(&server, &next).expect("copy");
    fs_err::rename(&next, &server).expect("install");
    wait_for("the old warm server to exit", || !alive(pid));
    assert!(!old_socket.exists(), "the old build's socket is left");
    wait_for("the old server's spares to be removed", || {
        !spare_dir.exists() && !probe_spare_dir.exists()
    });
    let (id, out) = run();
    assert!(!served_warm(&id), "the old build served run {id}");
    assert_eq!(out, cold);
    wait_for("a warm server of the new build", || {
        server_pid().is_some_and(|p| p != pid && alive(p))
    });
    let (id, _) = run();
    assert!(
        served_warm(&id),
        "the new build's server did not serve run {id}"
    );

    // Warm is the default: a config without `warm` is served warm. With `warm = false`, or
    // BAND_WARM=0 whatever the config says, a running warm server is not used.
    let default_band = band.clone().env("BAND_CONFIG", t.path().join("none.toml"));
    let (id, _) = run_script(&default_band, "probe");
    assert!(
        served_warm(&id),
        "a run with the default config was not served warm"
    );
    let cold_config = t.path().join("cold.toml");
    fs_err::write(&cold_config, "warm = false\n").expect("write");
    let (id, _) = run_script(&band.clone().env("BAND_CONFIG", &cold_config), "probe");
    assert!(
        !served_warm(&id),
        "a run with `warm = false` was served warm"
    );
    let (id, _) = run_script(&band.clone().env("BAND_WARM", "0"), "probe");
    assert!(!served_warm(&id), "a run with BAND_WARM=0 was served warm");

    // A warm server without runs exits after its idle time, and its socket goes with it.
    let running = server_pid().expect("the warm server's pid");
    let _ = std::process::Command::new("kill")
        .arg(running.to_string())
        .status();
    wait_for("the warm server to stop", || !alive(running));
    let digest = band::warm::digest_here(&server).expect("digest");
    let socket = band::warm::socket(Path::new(HOST_DIR), &digest);
    // What the host's server says goes to its log (`band_server::warm::LOG_FILE`): this one's
    // is what the log gains.
    let log = Path::new(HOST_DIR).join("serve.log");
    let logged = || fs_err::read(&log).unwrap_or_default();
    let before = logged().len();
    let mut idle = std::process::Command::new(&server)
        .args(["serve", &digest, "--host", "--idle", "1"])
        .spawn()
        .expect("band-server serve");
    wait_for("the idle server's socket", || socket.exists());
    let status = idle.wait().expect("wait");
    assert!(status.success(), "{status}");
    // It ended because it was idle, and said so (not for a change of build, nor a lost socket).
    let said = logged();
    // (The log starts again past a size: then all of it is new.)
    let said = String::from_utf8_lossy(said.get(before..).unwrap_or(&said));
    assert!(
        said.lines()
            .any(|l| l.starts_with("band-server serve: no run for ")
                && l.ends_with(&format!("; removed {} and exiting", socket.display()))),
        "{said}"
    );
    assert!(!socket.exists(), "the idle server left its socket");
}

/// Runs of [`net_skill`] on the warm server, its band-server's resolver the lab's.
struct NetRuns<'a> {
    root: &'a Path,
    skill: PathBuf,
    band: band_test::Band,
}

impl<'a> NetRuns<'a> {
    fn new(root: &'a Path, lab: &band_test::netlab::Lab) -> NetRuns<'a> {
        let skill = net_skill(root);
        let config = root.join("config.toml");
        fs_err::write(&config, "warm = true\n").expect("write");
        let band = bin()
            .env("BAND_CONFIG", &config)
            .env("BAND_SERVER_CONFIG", &lab.config)
            .env_remove("BAND_WARM");
        NetRuns { root, skill, band }
    }

    /// Run `n` (its input `{"n": n}`), which must succeed: its JSON result.
    fn run(&self, n: u32) -> Value {
        let (code, out, err) = self.band.run(
            &[
                "run",
                "--json",
                &format!("{}/fetch", self.skill.display()),
                "--input",
                &format!("{{\"n\":{n}}}"),
            ],
            self.root,
        );
        assert_eq!(code, 0, "{out}{err}");
        serde_json::from_str(&out).expect("json")
    }
}

/// Runs 1 and 2 of [`net_skill`] (`run` returns a run's id): the first starts the warm server,
/// the second is built by it, and a spare is then ready. The second's id and the spare's.
fn a_spare_after_two_runs(run: &dyn Fn(u32) -> String) -> (String, String) {
    run(1);
    wait_for("the warm server's pid file", || {
        server_pid().is_some_and(alive)
    });
    let second = run(2);
    assert_eq!(served(&second).as_deref(), Some("built for it"));
    wait_for("a spare", || spare_after(&second, "warmnet").is_some());
    let spare = spare_after(&second, "warmnet").expect("the spare's run id");
    (second, spare)
}

/// A skill whose script fetches `/warm/<n>` from the lab's host, which its band allows, and
/// tries another name, which it does not.
fn net_skill(root: &Path) -> PathBuf {
    band_test::SkillBuilder::new("warmnet")
        .description("Fetches from one host.")
        .body("Used by the warm server test.\n")
        .band("description: Fetches from one allowed host.\nallow:\n  net: [\"api.warm.test:8080\"]\n")
        .input_schema(
            "fetch",
            r#"{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}"#,
        )
        .script(
            "fetch.sh",
            r#"#!/bin/bash
n=$(sed -n 's/.*"n": *\([0-9]*\).*/\1/p' "$INPUT_PATH")
reached=no
if exec 3<>/dev/tcp/api.warm.test/8080; then
  printf 'GET /warm/%s HTTP/1.0\r\nHost: api.warm.test\r\n\r\n' "$n" >&3
  case "$(cat <&3)" in *"hello "*) reached=yes ;; esac
fi
if (exec 4<>/dev/tcp/other.warm.test/8080) 2>/dev/null; then other=reached; else other=refused; fi
printf '{"reached":"%s","other":"%s"}\n' "$reached" "$other" > "$OUTPUT_PATH"
"#,
        )
        .write(root)
}

/// A run with `allow.net` is served by a spare built with its table, relay and DNS stub: it
/// reaches its host and nothing else. A spare whose table is gone (a firewall's reload) serves
/// nothing: the next run is built for itself, with a table of its own.
#[test]
fn privileged_a_networked_run_is_served_by_a_spare_unless_its_table_is_gone() {
    band_test::privileged!(sandbox_missing());
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let _stop = StopServer;
    no_warm_server();
    let lab = band_test::netlab::Lab::new(&["api.warm.test"]);
    let t = tempfile::tempdir().expect("tempdir");
    let fetch = NetRuns::new(t.path(), &lab);
    let run = |n: u32| -> String {
        let v = fetch.run(n);
        let id = v["run_id"].as_str().expect("run_id").to_string();
        assert_eq!(
            v["output"],
            serde_json::json!({"reached": "yes", "other": "refused"}),
            "run {n} ({id})"
        );
        assert!(
            lab.log("http.log").contains(&format!("/warm/{n}")),
            "run {n} ({id}) did not reach the lab: {}",
            lab.log("http.log")
        );
        id
    };
    a_spare_after_two_runs(&run);
    let third = run(3);
    assert_eq!(served(&third).as_deref(), Some("a spare"), "run {third}");

    // The next spare's table deleted while it waits: it serves nothing.
    wait_for("a spare", || spare_after(&third, "warmnet").is_some());
    let spare = spare_after(&third, "warmnet").expect("the spare's run id");
    let table = format!("band_{spare}");
    wait_for("the spare's table", || {
        std::process::Command::new("nft")
            .args(["list", "table", "inet", &table])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let deleted = std::process::Command::new("nft")
        .args(["delete", "table", "inet", &table])
        .status()
        .expect("nft");
    assert!(deleted.success());
    let fourth = run(4);
    assert_eq!(
        served(&fourth).as_deref(),
        Some("built for it"),
        "run {fourth} was served by a spare without its table"
    );
}

/// A warm server told to stop (SIGTERM: another build replacing it, band-sandboxd stopping, an
/// operator) sends its spares away and exits only once each has removed its sandbox: when its
/// process is gone, nothing of its spare is left (processes, cgroup, run folder, nft table), and
/// its socket and pid file are gone too. A server that died at once would leave its spares to
/// tear down on their own after it; in a pod, whose init then exits, they would be killed half
/// way.
#[test]
fn privileged_a_warm_server_told_to_stop_waits_for_its_spares_to_tear_down() {
    band_test::privileged!(sandbox_missing());
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let _stop = StopServer;
    no_warm_server();
    let lab = band_test::netlab::Lab::new(&["api.warm.test"]);
    let t = tempfile::tempdir().expect("tempdir");
    let fetch = NetRuns::new(t.path(), &lab);
    let run = |n: u32| -> String {
        let v = fetch.run(n);
        v["run_id"].as_str().expect("run_id").to_string()
    };
    let (second, spare) = a_spare_after_two_runs(&run);
    let table = format!("band_{spare}");
    let has_table = || {
        std::process::Command::new("nft")
            .args(["list", "table", "inet", &table])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert!(has_table(), "the ready spare {spare} has no table");
    assert!(
        !crate::cancel::leftovers(Some(&spare), u32::MAX, 0..0).is_empty(),
        "the ready spare {spare} has no process or cgroup to look for"
    );
    let pid = server_pid().expect("pid");
    let socket = fs_err::read_dir(HOST_DIR)
        .expect("the warm server's folder")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the warm server's socket");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    wait_for("the warm server to exit", || !alive(pid));
    // At once, not eventually: the server waited for its spare.
    let left = crate::cancel::leftovers(Some(&spare), u32::MAX, 0..0);
    assert!(left.is_empty(), "the spare {spare} left: {left:#?}");
    assert!(!has_table(), "the spare {spare} left its table {table}");
    assert!(!socket.exists(), "{} is still there", socket.display());
    assert!(server_pid().is_none(), "the pid file is still there");
    let log = fs_err::read_to_string(Path::new(HOST_DIR).join("serve.log")).expect("log");
    let after = log
        .find(&format!("run {second} served"))
        .map_or(log.as_str(), |i| &log[i..]);
    // In this order: the stop, the spare's removal, the server's end.
    let at = |what: &str| {
        after
            .find(what)
            .unwrap_or_else(|| panic!("no `{what}` in the log:\n{after}"))
    };
    let told = at("band-server serve: told to stop; stopping once its");
    let removed = at(&format!(
        "band-server serve: spare {spare} removed (sent away"
    ));
    let stopped = at("band-server serve: stopped (");
    assert!(told < removed && removed < stopped, "{after}");
}

/// A declared secret reaches band-server in its run's request only: neither the run's own
/// band-server nor the warm one (alive for minutes between runs) is started with the caller's
/// environment, so no secret, declared or not, is in their `/proc/PID/environ`.
#[test]
fn privileged_band_server_and_the_warm_server_start_without_the_callers_secrets() {
    band_test::privileged!(sandbox_missing());
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let _stop = StopServer;
    no_warm_server();
    let t = tempfile::tempdir().expect("tempdir");
    let band = bin();
    let bins = copied_server(&band, t.path());
    let dumps = t.path().join("env");
    fs_err::create_dir_all(&dumps).expect("mkdir");
    // A run's own band-server: started through a stand-in that writes down the environment it
    // was given, then execs the real one (a warm server must be the real file: it serves only
    // its own build's digest).
    let stand_in = bins.join("band-server-env");
    fs_err::write(
        &stand_in,
        format!(
            "#!/bin/sh\ncat /proc/$$/environ > '{}/env.'$$\nexec '{}' \"$@\"\n",
            dumps.display(),
            bins.join("band-server").display()
        ),
    )
    .expect("write");
    fs_err::set_permissions(
        &stand_in,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let config = t.path().join("config.toml");
    fs_err::write(&config, "warm = true\n").expect("write");
    let band = band
        .env("BAND_CONFIG", &config)
        .env_remove("BAND_WARM")
        .env("UNDECLARED_TOKEN", "undeclared-value-7f3a");
    let skill = probe_skill(t.path());
    let work = t.path().join("work");
    fs_err::create_dir_all(&work).expect("mkdir");
    let run = |band: &band_test::Band, n: u32| {
        fs_err::write(work.join("in.txt"), format!("file {n}\n")).expect("write");
        let (code, out, err) = band
            .clone()
            .env("WARM_TOKEN", format!("declared-value-{n}"))
            .run(
                &[
                    "run",
                    "--json",
                    &format!("{}/probe", skill.display()),
                    "--input",
                    &format!("{{\"n\":{n}}}"),
                ],
                &work,
            );
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).expect("json");
        // The run itself still sees its secret.
        assert_eq!(
            v["output"]["own"]["token"],
            Value::from(format!("declared-value-{n}")),
            "{out}"
        );
        v["run_id"].as_str().expect("run_id").to_string()
    };
    let mut seen = Vec::new();

    // A run's own band-server, no warm one.
    run(
        &band
            .clone()
            .env("BAND_SERVER", &stand_in)
            .env("BAND_WARM", "0"),
        1,
    );
    for e in fs_err::read_dir(&dumps).expect("dumps").flatten() {
        let env = fs_err::read(e.path()).expect("dump");
        seen.push((e.path().display().to_string(), env));
    }
    assert_eq!(seen.len(), 1, "one band-server started");

    // The warm server: started after the first run, serving the second.
    let band = band.env("BAND_SERVER", bins.join("band-server"));
    let before = sockets();
    run(&band, 2);
    wait_for("a warm server's socket", || {
        sockets().iter().any(|s| !before.contains(s))
    });
    wait_for("the warm server's pid file", || {
        server_pid().is_some_and(alive)
    });
    let second = run(&band, 3);
    assert!(
        served(&second).is_some(),
        "run {second} was not served warm"
    );
    let pid = server_pid().expect("the warm server's pid");
    let environ = fs_err::read(format!("/proc/{pid}/environ")).expect("the warm server's environ");
    seen.push((format!("the warm server (pid {pid})"), environ));

    for (what, env) in &seen {
        let env = String::from_utf8_lossy(env);
        let names: Vec<&str> = env
            .split('\0')
            .filter_map(|kv| kv.split('=').next())
            .filter(|k| !k.is_empty())
            .collect();
        for secret in ["WARM_TOKEN", "UNDECLARED_TOKEN"] {
            assert!(!names.contains(&secret), "{what} holds {secret}: {names:?}");
        }
        for value in ["declared-value", "undeclared-value-7f3a"] {
            assert!(!env.contains(value), "{what} holds {value}");
        }
        assert!(names.contains(&"PATH"), "{what}: {names:?}");
    }
}

/// A run served by a spare says the tier the site policy gave it, as a run of its own does.
#[test]
fn privileged_a_run_served_by_a_spare_says_its_tier() {
    band_test::privileged!(sandbox_missing());
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let _stop = StopServer;
    no_warm_server();
    let t = tempfile::tempdir().expect("tempdir");
    let band = bin();
    let bins = copied_server(&band, t.path());
    let site = t.path().join("site.md");
    fs_err::write(
        &site,
        "---\nunsigned: community\ntiers:\n  community: {}\n---\n",
    )
    .expect("write");
    let server_cfg = t.path().join("server.toml");
    fs_err::write(
        &server_cfg,
        format!("site_policy = \"{}\"\n", site.display()),
    )
    .expect("write");
    let config = t.path().join("config.toml");
    fs_err::write(&config, "warm = true\n").expect("write");
    let band = band
        .env("BAND_SERVER", bins.join("band-server"))
        .env("BAND_SERVER_CONFIG", &server_cfg)
        .env("BAND_CONFIG", &config)
        .env_remove("BAND_WARM");
    let skill = probe_skill(t.path());
    let work = t.path().join("work");
    fs_err::create_dir_all(&work).expect("mkdir");
    let run = |n: u32| {
        fs_err::write(work.join("in.txt"), format!("file {n}\n")).expect("write");
        let (code, out, err) = band.clone().env("WARM_TOKEN", "t").run(
            &[
                "run",
                "--json",
                &format!("{}/probe", skill.display()),
                "--input",
                &format!("{{\"n\":{n}}}"),
            ],
            &work,
        );
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["trust"]["tier"], "community", "{out}");
        v["run_id"].as_str().expect("run_id").to_string()
    };
    let before = sockets();
    run(1);
    wait_for("a warm server's socket", || {
        sockets().iter().any(|s| !before.contains(s))
    });
    wait_for("the warm server's pid file", || {
        server_pid().is_some_and(alive)
    });
    let second = run(2);
    assert_eq!(served(&second).as_deref(), Some("built for it"));
    wait_for("a spare", || spare_after(&second, "warmprobe").is_some());
    let third = run(3);
    assert_eq!(served(&third).as_deref(), Some("a spare"), "run {third}");
}
