//! Issue 42: correctness under load. 64 runs at once, of eight skills, each its own uid: every
//! run sees only its own files, processes, network rules and secrets, and nothing of any run is
//! left behind (processes, cgroups, run folders, nft tables), including when a quarter of their
//! clients are killed mid-run. Twice: each run with a band-server of its own, and on the host's
//! warm server (the default), with spares of some of the skills waiting when the runs come.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use band_test::SkillBuilder;
use serde_json::Value;

use crate::common::sandbox_missing;

const SKILLS: usize = 8;
const RUNS: usize = 64;
/// Every fourth client is killed once its run's script is running.
const KILL_EVERY: usize = 4;
/// What run `i`'s `slow` script runs while it waits to be killed: seen by its command line.
fn slow_sleep(i: usize) -> String {
    format!("sleep {}", 1200 + i)
}

fn host(k: usize) -> String {
    format!("s{k}.load.test")
}

/// Skill `load<k>`: reads `in.txt`, writes `out/`, has the secret `LOAD_TOKEN` and the network of
/// its own host only. `probe` reports, from inside, what of the machine it sees; `slow` waits
/// until it is killed.
fn skill(root: &Path, k: usize) -> PathBuf {
    let probe = format!(
        r#"#!/bin/bash
own=closed; other=closed
why=$( (exec 3<>/dev/tcp/{own}/8080) 2>&1 ) && own=open
(exec 3<>/dev/tcp/{other}/8080) 2>/dev/null && other=open
uid=$(awk '/^Uid:/ {{print $2}}' /proc/self/status)
pids=0; foreign=0
for p in /proc/[0-9]*; do
  pids=$((pids+1))
  tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q 'slow.sh\|band-server' && foreign=$((foreign+1))
done
ws=$(cd /workspace && ls -A | tr '\n' ' ')
tmp=$(ls -A /tmp | tr '\n' ' ')
read -r in < /workspace/in.txt
mkdir -p /workspace/out && echo "$LOAD_TOKEN" > /workspace/out/token.txt
printf '{{"token":"%s","in":"%s","ws":"%s","tmp":"%s","uid":%s,"pids":%s,"foreign":%s,"own":"%s","other":"%s","why":"%s"}}\n' \
  "$LOAD_TOKEN" "$in" "$ws" "$tmp" "$uid" "$pids" "$foreign" "$own" "$other" "$(echo $why | tr -d '"')" > "$OUTPUT_PATH"
"#,
        own = host(k),
        other = host((k + 1) % SKILLS),
    );
    SkillBuilder::new(&format!("load{k}"))
        .description("Probes what a run sees.")
        .body("Used by the load test.\n")
        .band(&format!(
            "description: Probes what a run sees.\nallow:\n  read: [in.txt]\n  write: [\"out/**\"]\n  net: [\"{}:8080\"]\n  cli: [\"awk *\", \"tr *\", \"grep *\", \"ls *\", \"mkdir *\", \"sleep *\"]\nenv:\n  secrets: [LOAD_TOKEN]\nlimit:\n  maxRuntimeMs: 20m\n",
            host(k)
        ))
        .input_schema("probe", SkillBuilder::NO_INPUT)
        .script("probe.sh", &probe)
        .input_schema(
            "slow",
            r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
        )
        .script(
            "slow.sh",
            "#!/bin/bash\nn=$(tr -dc 0-9 < \"$INPUT_PATH\")\nexec sleep $((1200 + n))\n",
        )
        .write(root)
}

/// What the warm server's log holds past `from` (all of it when it started again since: past
/// 1 MiB it does).
fn since(log: &[u8], from: u64) -> &[u8] {
    usize::try_from(from)
        .ok()
        .and_then(|from| log.get(from..))
        .unwrap_or(log)
}

/// The run ids of the run starts in the ledger under `data`.
fn started_runs(data: &Path) -> BTreeSet<String> {
    let text = fs_err::read_to_string(data.join(band::ledger::LEDGER_FILE)).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let rec = v.get("record").unwrap_or(&v);
            rec.get("run_id")?.as_str().map(String::from)
        })
        .collect()
}

/// Kills the processes it names when dropped: the clients of a test that failed, each named only
/// until it is reaped (a reaped pid may be another process's).
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

#[test]
fn privileged_sixty_four_runs_at_once_see_only_their_own_and_leave_nothing_behind() {
    band_test::privileged!(sandbox_missing());
    // No warm test's spare beside the 64: they would send it away (`warm::ONE_SERVER`).
    let _one = crate::warm::ONE_SERVER
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    sixty_four_runs(false);
}

/// The same on the host's warm server, as `band run` runs by default: the runs come while spares
/// of four of the skills wait (there are more shapes than spares), most are served by
/// children forked for them, and once the server is stopped nothing of any run or spare is left.
#[test]
fn privileged_sixty_four_runs_on_the_warm_server_see_only_their_own_and_leave_nothing_behind() {
    band_test::privileged!(sandbox_missing());
    let _one = crate::warm::ONE_SERVER
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let _stop = crate::warm::StopServer;
    crate::warm::no_warm_server();
    sixty_four_runs(true);
}

fn sixty_four_runs(warm: bool) {
    let names: Vec<String> = (0..SKILLS).map(host).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let lab = band_test::netlab::Lab::new(&refs);
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    for k in 0..SKILLS {
        skill(&skills, k);
    }
    let data = t.path().join("data");
    let mut band = band_test::Band::new(crate::common::band_exe(), &data)
        .env("BAND_SERVER_CONFIG", &lab.config);
    let log = Path::new(crate::warm::HOST_DIR).join("serve.log");
    let log_from = fs_err::metadata(&log).map(|m| m.len()).unwrap_or(0);
    if warm {
        // The config decides (the tests' environment says BAND_WARM=0).
        let config = t.path().join("config.toml");
        fs_err::write(&config, "warm = true\n").expect("write");
        band = band.env("BAND_CONFIG", &config).env_remove("BAND_WARM");
        // One run of each skill first, one after the other: the server starts, and spares of
        // four of the skills wait when the 64 come (the others' are refused: four are young).
        for k in 0..SKILLS {
            let ws = t.path().join(format!("first{k}"));
            fs_err::create_dir_all(&ws).expect("mkdir");
            fs_err::write(ws.join("in.txt"), "first\n").expect("write");
            let (code, out, err) = band.clone().env("LOAD_TOKEN", "first").run(
                &[
                    "run",
                    "--json",
                    "--skills",
                    &skills.display().to_string(),
                    &format!("load{k}/probe"),
                ],
                &ws,
            );
            assert_eq!(code, 0, "first run of load{k}: {out}{err}");
        }
        band_test::wait_until("spares of the last skills", || {
            let text = fs_err::read(&log).unwrap_or_default();
            let text = String::from_utf8_lossy(since(&text, log_from));
            text.matches(" ready for load").count() >= 4
        });
    }
    let mut clients: Vec<(usize, Child, PathBuf)> = Vec::new();
    for i in 0..RUNS {
        let k = i % SKILLS;
        let killed = i % KILL_EVERY == KILL_EVERY - 1;
        let ws = t.path().join(format!("ws{i}"));
        fs_err::create_dir_all(&ws).expect("mkdir");
        fs_err::write(ws.join("in.txt"), format!("input {i}\n")).expect("write");
        let script = if killed { "slow" } else { "probe" };
        let mut cmd = Command::new(band.exe());
        cmd.args(["run", "--json", "--skills"])
            .arg(&skills)
            .arg(format!("load{k}/{script}"));
        if killed {
            cmd.arg(format!("--n={i}"));
        }
        cmd.current_dir(&ws)
            .env("LOAD_TOKEN", format!("token-{i}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        band.apply(&mut cmd);
        clients.push((i, cmd.spawn().expect("band run"), ws));
    }
    // A test that fails from here on kills every client it started (a client's run ends with
    // it), so a failure leaves no run behind.
    let mut guard = KillOnDrop(clients.iter().map(|(_, c, _)| c.id()).collect());
    // A quarter of the clients are killed once their script runs. One that ends before its
    // script runs fails the test with what it said (a run refused at setup, say).
    for (i, child, _) in clients.iter_mut() {
        if *i % KILL_EVERY != KILL_EVERY - 1 {
            continue;
        }
        band_test::wait_until(&format!("client {i}'s script to run"), || {
            band_test::running(&slow_sleep(*i)) || child.try_wait().ok().flatten().is_some()
        });
        if let Ok(Some(status)) = child.try_wait() {
            let pid = child.id();
            guard.0.retain(|p| *p != pid);
            let mut err = String::new();
            if let Some(e) = child.stderr.as_mut() {
                let _ = std::io::Read::read_to_string(e, &mut err);
            }
            panic!("client {i} ended ({status}) before its script ran: {err}");
        }
        let _ = child.kill();
    }
    let mut uids = BTreeSet::new();
    let mut served = Vec::new();
    for (i, child, ws) in clients {
        // Once reaped, its pid may be another process's: no longer the guard's.
        let pid = child.id();
        let out = child.wait_with_output().expect("wait");
        guard.0.retain(|p| *p != pid);
        if i % KILL_EVERY == KILL_EVERY - 1 {
            continue;
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "run {i}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_str(&stdout).expect("json");
        let seen = &v["output"];
        assert_eq!(seen["token"], format!("token-{i}"), "run {i}: {seen}");
        assert_eq!(seen["in"], format!("input {i}"), "run {i}: {seen}");
        // Only its own workspace's file (`out/`, which `allow.write: out/**` names, is not made
        // for a workspace that lacks it); nothing of another run is there.
        assert_eq!(seen["ws"], "in.txt ", "run {i}: {seen}");
        assert_eq!(seen["tmp"], "", "run {i}: {seen}");
        assert_eq!(
            seen["foreign"], 0,
            "run {i} sees another run's processes: {seen}"
        );
        assert!(
            seen["pids"].as_u64().is_some_and(|n| n < 12),
            "run {i}: {seen}"
        );
        assert_eq!(
            (&seen["own"], &seen["other"]),
            (&Value::from("open"), &Value::from("closed")),
            "run {i}: {v}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            fs_err::read_to_string(ws.join("out/token.txt"))
                .ok()
                .as_deref(),
            Some(format!("token-{i}\n").as_str()),
            "run {i}'s file"
        );
        served.push(v["run_id"].as_str().expect("run_id").to_string());
        let uid = seen["uid"].as_u64().expect("uid");
        assert!(uid > 0, "run {i}: {seen}");
        uids.insert(uid);
    }
    assert!(uids.len() > 1, "every run had one uid: {uids:?}");

    // Nothing of any run is left: every run the clients started (the ledger has each start),
    // and on the warm server every spare it built (its log names each), once it is stopped.
    let mut runs = started_runs(&data);
    let first = if warm { SKILLS } else { 0 };
    assert_eq!(runs.len(), RUNS + first, "{runs:?}");
    if warm {
        let pid = crate::warm::server_pid().expect("the warm server's pid file");
        let _ = Command::new("kill").arg(pid.to_string()).status();
        band_test::wait_until("the warm server to exit", || !crate::warm::alive(pid));
        let text = fs_err::read(&log).expect("the warm server's log");
        let text = String::from_utf8_lossy(since(&text, log_from));
        let spares = band_test::spares_in(&text);
        assert!(spares.len() >= 4, "{text}");
        // Each run was the warm server's, and the first of each skill with a spare waiting
        // was served by it.
        let how: Vec<&str> = served
            .iter()
            .map(|id| {
                let needle = format!("run {id} served by the warm server (");
                let line = text.lines().find(|l| l.contains(&needle));
                let line = line.unwrap_or_else(|| panic!("run {id} not served warm:\n{text}"));
                if line.contains("(a spare;") {
                    "a spare"
                } else {
                    "built"
                }
            })
            .collect();
        assert!(
            how.contains(&"a spare"),
            "no run was served by a spare:\n{text}"
        );
        runs.extend(spares);
    }
    let left = || {
        let tables = Command::new("nft")
            .args(["list", "tables"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        runs.iter()
            .flat_map(|id| {
                let mut l = crate::cancel::leftovers(Some(id), u32::MAX, 0..0);
                if tables.contains(&format!("band_{id}")) {
                    l.push(format!("nft table band_{id}"));
                }
                l
            })
            .collect::<Vec<String>>()
    };
    let last = std::cell::RefCell::new(Vec::new());
    let gone = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        band_test::wait_until("every run's leftovers to go", || {
            *last.borrow_mut() = left();
            last.borrow().is_empty()
        })
    }));
    assert!(gone.is_ok(), "left behind: {:#?}", last.borrow());
    drop(lab);
}
