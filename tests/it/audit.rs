//! `band lock`, the ledger through `band run`, `band history`, `band show`, `band audit verify`.
//!
//! Every test has its own data folder (`$BAND_DATA_DIR`) and config (`$BAND_CONFIG`). Runs refused
//! before the sandbox (integrity_failed, input_invalid) need no privileges; the test named
//! `privileged_*` runs the real sandbox and skips without root unless `BAND_TEST_MUST_RUN=1`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use band::ledger::{Entry, IoDigest, Ledger, LockMark, RunRecord};
use band::proto::{Denial, Event, Metrics, Status};
use band_test::{Band, Output, band_snapshot, copy_dir};
use fs_err::os::unix::fs::symlink;

use crate::common::{band_exe, repo};

/// A copy of the repository's `text` skill, its own data folder and an empty config.
struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().expect("tmp");
        copy_dir(&repo().join("skills/text"), &tmp.path().join("skills/text"));
        fs_err::remove_file(tmp.path().join("skills/text/band.lock")).ok();
        fs_err::write(tmp.path().join("config.toml"), "").expect("config");
        Env { tmp }
    }

    fn skill(&self) -> PathBuf {
        self.tmp.path().join("skills/text")
    }

    fn data(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    fn bin(&self) -> Band {
        Band::new(band_exe(), self.data()).env("BAND_CONFIG", self.tmp.path().join("config.toml"))
    }

    fn command(&self, args: &[&str]) -> Command {
        self.bin().command(args, self.tmp.path())
    }

    fn band(&self, args: &[&str]) -> (i32, String, String) {
        self.bin().run(args, self.tmp.path())
    }

    fn output(&self, args: &[&str]) -> Output {
        self.bin().output(args, self.tmp.path())
    }

    /// The test's folder, for snapshot filters.
    fn dir(&self) -> &str {
        self.tmp.path().to_str().expect("utf-8")
    }

    fn ledger(&self) -> Ledger {
        Ledger::new(self.data())
    }

    fn runs(&self) -> Vec<RunRecord> {
        self.ledger()
            .records()
            .expect("records")
            .iter()
            .filter_map(|s| s.run().cloned())
            .collect()
    }
}

#[test]
fn lock_round_trip_and_check() {
    let env = Env::new();
    band_snapshot!(env.output(&["lock", "skills/text"]), "lock");
    let text = fs_err::read_to_string(env.skill().join("band.lock")).expect("lock");
    assert!(
        text.contains("\nfile 0755 ") && text.contains(" \"scripts/count.sh\"\n"),
        "{text}"
    );
    let (code, out, _) = env.band(&["lock", "--check", "skills/text"]);
    assert_eq!(code, 0, "{out}");
    // Locking again changes nothing.
    env.band(&["lock", "skills/text"]);
    assert_eq!(
        fs_err::read_to_string(env.skill().join("band.lock")).expect("lock"),
        text
    );
    // The lock's bundle line is the bundle hash the run sends (and the ledger records).
    let bundle = text
        .lines()
        .find_map(|l| l.strip_prefix("bundle "))
        .expect("bundle line")
        .to_string();
    let (code, _, err) = env.band(&["run", "--skills", "skills", "text/count", "--nope=1"]);
    assert_eq!(code, 3, "{err}");
    let runs = env.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].status, runs[0].lock, runs[0].bundle_sha256.as_str()),
        (Status::InputInvalid, LockMark::Matches, bundle.as_str())
    );
}

/// `band lock` refuses what `band lint` refuses: a band with a YAML error is not locked (the
/// integrity hint sends users to `band lock`, which before locked it as it was).
#[test]
fn lock_refuses_a_skill_lint_finds_errors_in() {
    let env = Env::new();
    let band_md = env.skill().join("BAND.md");
    let text = fs_err::read_to_string(&band_md).expect("read");
    fs_err::write(&band_md, text.replacen("version: 1\n", "version: [1\n", 1)).expect("write");
    assert_ne!(env.band(&["lint", "skills/text"]).0, 0);
    let out = env.output(&["lock", "skills/text"]);
    band_snapshot!(out, "lock_lint_errors");
    assert!(!env.skill().join("band.lock").exists());
    // Fixed, it locks.
    fs_err::write(&band_md, text).expect("write");
    assert_eq!(env.band(&["lock", "skills/text"]).0, 0);
}

#[test]
fn lock_check_without_a_lock_fails() {
    let env = Env::new();
    band_snapshot!(
        env.output(&["lock", "--check", "skills/text"]),
        "lock_check_missing"
    );
}

/// Lock the skill, change it with `tamper`, run: refused with integrity_failed, the change listed,
/// nothing sent, the refusal recorded. What the user sees is the snapshot `name`.
fn refused_after(tamper: impl FnOnce(&Path), listed: &str, name: &str) {
    let env = Env::new();
    assert_eq!(env.band(&["lock", "skills/text"]).0, 0);
    tamper(&env.skill());
    // BAND_SERVER points nowhere: had the run reached the transport it would be a usage error.
    let mut cmd = env.command(&["run", "--skills", "skills", "text/count", "--text=hi"]);
    cmd.env("BAND_SERVER", "/nonexistent/band-server");
    band_snapshot!(Output::of(&mut cmd), name, &[(env.dir(), "[DIR]")]);
    let runs = env.runs();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(
        (r.status, r.exit_code, r.lock),
        (Status::IntegrityFailed, 7, LockMark::Differs)
    );
    assert!(
        r.integrity.iter().any(|d| d.contains(listed)),
        "{:?}",
        r.integrity
    );
    assert_eq!(env.band(&["lock", "--check", "skills/text"]).0, 7);
}

#[test]
fn one_changed_byte_is_refused() {
    refused_after(
        |s| {
            let p = s.join("scripts/count.sh");
            let mut b = fs_err::read(&p).expect("read");
            b[20] ^= 1;
            fs_err::write(&p, b).expect("write");
        },
        "scripts/count.sh: content changed",
        "integrity_changed_byte",
    );
}

#[test]
fn an_added_file_is_refused() {
    refused_after(
        |s| fs_err::write(s.join("scripts/extra.sh"), "#!/bin/sh\n").expect("write"),
        "scripts/extra.sh: added",
        "integrity_added_file",
    );
}

#[test]
fn a_changed_mode_is_refused() {
    refused_after(
        |s| {
            fs_err::set_permissions(s.join("SKILL.md"), std::fs::Permissions::from_mode(0o755))
                .expect("chmod")
        },
        "SKILL.md: mode changed from 0644 to 0755",
        "integrity_changed_mode",
    );
}

#[test]
fn a_swapped_symlink_is_refused() {
    // A skill that links inside itself, locked, then the link re-pointed.
    let env = Env::new();
    fs_err::write(env.skill().join("scripts/a.txt"), "a\n").expect("write");
    fs_err::write(env.skill().join("scripts/b.txt"), "b\n").expect("write");
    symlink("a.txt", env.skill().join("scripts/data.txt")).expect("symlink");
    assert_eq!(env.band(&["lock", "skills/text"]).0, 0);
    fs_err::remove_file(env.skill().join("scripts/data.txt")).expect("rm");
    symlink("b.txt", env.skill().join("scripts/data.txt")).expect("symlink");
    band_snapshot!(
        env.output(&["run", "--skills", "skills", "text/count", "--text=hi"]),
        "integrity_swapped_symlink",
        &[(env.dir(), "[DIR]")]
    );
}

#[test]
fn a_link_out_of_the_skill_cannot_be_locked() {
    let env = Env::new();
    symlink("/etc/passwd", env.skill().join("scripts/passwd")).expect("symlink");
    band_snapshot!(
        env.output(&["lock", "skills/text"]),
        "lock_link_outside",
        &[(env.dir(), "[DIR]")]
    );
    assert!(!env.skill().join("band.lock").exists());
}

#[test]
fn require_lock_refuses_an_unlocked_skill_by_flag_and_by_config() {
    let env = Env::new();
    band_snapshot!(
        env.output(&[
            "run",
            "--require-lock",
            "--skills",
            "skills",
            "text/count",
            "--text=hi",
        ]),
        "require_lock_unlocked",
        &[(env.dir(), "[DIR]")]
    );
    fs_err::write(env.tmp.path().join("config.toml"), "require_lock = true\n").expect("config");
    let (code, _, err) = env.band(&["run", "--skills", "skills", "text/count", "--text=hi"]);
    assert_eq!(code, 7, "{err}");
    let runs = env.runs();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter()
            .all(|r| r.status == Status::IntegrityFailed && r.lock == LockMark::Unlocked)
    );
    // Locked, the same run gets past the lock (and stops at the input contract here).
    assert_eq!(env.band(&["lock", "skills/text"]).0, 0);
    assert_eq!(
        env.band(&["run", "--skills", "skills", "text/count", "--nope=1"])
            .0,
        3
    );
}

#[test]
fn input_invalid_runs_are_recorded_without_contents_unless_asked() {
    let env = Env::new();
    assert_eq!(
        env.band(&[
            "run",
            "--skills",
            "skills",
            "text/count",
            "--secret=hunter2"
        ])
        .0,
        3
    );
    assert_eq!(
        env.band(&[
            "run",
            "--record-io",
            "--skills",
            "skills",
            "text/count",
            "--secret=hunter2"
        ])
        .0,
        3
    );
    let ledger = fs_err::read_to_string(env.data().join("ledger.jsonl")).expect("ledger");
    let lines: Vec<&str> = ledger.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(!lines[0].contains("hunter2"), "{}", lines[0]);
    assert!(lines[1].contains("hunter2"), "{}", lines[1]);
    let runs = env.runs();
    assert_eq!(
        runs[0].input.sha256, runs[1].input.sha256,
        "the same input has the same hash"
    );
    assert_eq!(runs[0].input.data, None);
    assert_eq!(
        runs[1].input.data,
        Some(serde_json::json!({"secret": "hunter2"}))
    );
}

#[test]
fn user_errors_leave_nothing_behind() {
    let env = Env::new();
    let (code, _, err) = env.band(&["run", "--skills", "skills", "text/nosuch"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        !env.data().exists(),
        "no ledger for a run that never was one"
    );
}

#[test]
fn thirty_two_concurrent_runs_append_thirty_two_valid_records() {
    let env = Env::new();
    let children: Vec<_> = (0..32)
        .map(|i| {
            env.command(&[
                "run",
                "--skills",
                "skills",
                "text/count",
                &format!("--n{i}=1"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn")
        })
        .collect();
    for mut c in children {
        assert_eq!(c.wait().expect("wait").code(), Some(3));
    }
    let (code, out, _) = env.band(&["audit", "verify", "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (
            v["ok"].as_bool(),
            v["records"].as_u64(),
            v["last_seq"].as_u64()
        ),
        (Some(true), Some(32), Some(32))
    );
    let mut ids: Vec<String> = env.runs().into_iter().map(|r| r.run_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 32);
}

fn fixture_run(id: &str, skill: &str, script: &str, status: Status, started: u64) -> Entry {
    Entry::Run(Box::new(RunRecord {
        run_id: id.into(),
        started_at_ms: started,
        ended_at_ms: started + 250,
        skill: skill.into(),
        script: script.into(),
        target: "host".into(),
        band_sha256: "1".repeat(64),
        bundle_sha256: "2".repeat(64),
        lock: if status == Status::IntegrityFailed {
            LockMark::Differs
        } else {
            LockMark::Matches
        },
        learn: false,
        integrity: if status == Status::IntegrityFailed {
            vec!["scripts/count.sh: content changed".into()]
        } else {
            Vec::new()
        },
        policy_sha256: "3".repeat(64),
        input: IoDigest {
            bytes: 16,
            sha256: "4".repeat(64),
            data: None,
        },
        output: IoDigest {
            bytes: 32,
            sha256: "5".repeat(64),
            data: None,
        },
        status,
        exit_code: status.exit_code(),
        script_exit: (status == Status::Ok || status == Status::Denied)
            .then_some(if status == Status::Ok { 0 } else { 1 }),
        metrics: Metrics {
            setup_ms: 20,
            run_ms: 200,
            teardown_ms: 30,
            peak_memory_bytes: Some(3 << 20),
            input_bytes: 16,
            output_bytes: 32,
        },
        denied: if status == Status::Denied {
            vec![Denial::Cli {
                argv: vec!["curl".into(), "example.com".into()],
                rule: None,
                source: None,
            }]
        } else {
            Vec::new()
        },
        insist_missing: Vec::new(),
        forged: None,
        deps_sha256: None,
        trust: None,
        error: None,
        events: vec![Event::Started {
            run_id: id.into(),
            setup_ms: 20,
        }],
        events_dropped: 0,
        stdout: None,
        stderr: None,
    }))
}

/// Four runs, 2025-03-01 12:00 UTC and an hour apart.
fn fixture(env: &Env) {
    let l = env.ledger();
    let t0 = 1_740_830_400_000u64;
    l.append(fixture_run(
        "00000000000000a1",
        "text",
        "count",
        Status::Ok,
        t0,
    ))
    .expect("append");
    l.append(fixture_run(
        "00000000000000a2",
        "web",
        "fetch",
        Status::Denied,
        t0 + 3_600_000,
    ))
    .expect("append");
    l.append(fixture_run(
        "00000000000000a3",
        "text",
        "count",
        Status::IntegrityFailed,
        t0 + 7_200_000,
    ))
    .expect("append");
    l.append(fixture_run(
        "00000000000000a4",
        "text",
        "upper",
        Status::Ok,
        t0 + 10_800_000,
    ))
    .expect("append");
}

#[test]
fn history_json_snapshot() {
    let env = Env::new();
    fixture(&env);
    let (code, out, err) = env.band(&["history", "--skill", "text", "--limit", "2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    insta::assert_json_snapshot!("history_json", v);
}

#[test]
fn history_table_snapshot() {
    let env = Env::new();
    fixture(&env);
    let (code, out, err) = env.band(&["history"]);
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("history_table", out);
}

#[test]
fn history_filters() {
    let env = Env::new();
    fixture(&env);
    let ids = |args: &[&str]| {
        let mut a = vec!["history", "--json"];
        a.extend_from_slice(args);
        let (code, out, err) = env.band(&a);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        v.as_array()
            .expect("array")
            .iter()
            .map(|r| r["run_id"].as_str().unwrap_or("")[14..].to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(ids(&[]), "a4 a3 a2 a1");
    assert_eq!(ids(&["--skill", "text"]), "a4 a3 a1");
    assert_eq!(ids(&["--skill", "text/count"]), "a3 a1");
    assert_eq!(ids(&["--status", "ok"]), "a4 a1");
    assert_eq!(ids(&["--status", "integrity_failed"]), "a3");
    assert_eq!(ids(&["--limit", "1"]), "a4");
    assert_eq!(ids(&["--since", "1h"]), "", "the fixture is from 2025");
    // A fresh run is within the last hour.
    assert_eq!(
        env.band(&["run", "--skills", "skills", "text/count", "--nope=1"])
            .0,
        3
    );
    assert_eq!(ids(&["--since", "1h"]).len(), 2, "one run in the last hour");
    // The valid statuses are listed.
    band_snapshot!(
        env.output(&["history", "--status", "fine"]),
        "history_bad_status"
    );
    assert_eq!(env.band(&["history", "--since", "soon"]).0, 2);
}

#[test]
fn show_one_run_with_its_events() {
    let env = Env::new();
    fixture(&env);
    band_snapshot!(env.output(&["show", "00000000000000a2"]), "show");
    let (code, out, _) = env.band(&["show", "--json", "00000000000000a3"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (v["seq"].as_u64(), v["status"].as_str()),
        (Some(3), Some("integrity_failed"))
    );
    // An ambiguous prefix is an error.
    band_snapshot!(env.output(&["show", "00000000000000a"]), "show_ambiguous");
    band_snapshot!(env.output(&["show", "ffff"]), "show_unknown");
}

#[test]
fn audit_verify_names_the_first_broken_record() {
    let env = Env::new();
    fixture(&env);
    band_snapshot!(env.output(&["audit", "verify"]), "verify_intact");
    let path = env.data().join("ledger.jsonl");
    let text = fs_err::read_to_string(&path).expect("read");
    fs_err::write(
        &path,
        text.replacen("\"status\":\"denied\"", "\"status\":\"ok\"", 1),
    )
    .expect("write");
    band_snapshot!(
        env.output(&["audit", "verify"]),
        "verify_broken",
        &[(env.dir(), "[DIR]")]
    );
    let (code, out, _) = env.band(&["audit", "verify", "--json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (v["ok"].as_bool(), v["broken"]["line"].as_u64()),
        (Some(false), Some(2))
    );
    // History shows what it can read and names the line it cannot.
    fs_err::write(&path, format!("{text}not json\n")).expect("write");
    band_snapshot!(
        env.output(&["history"]),
        "history_unreadable_line",
        &[(env.dir(), "[DIR]")]
    );
}

#[test]
fn prune_writes_a_checkpoint_and_the_chain_still_verifies() {
    let env = Env::new();
    fixture(&env); // 2025
    assert_eq!(
        env.band(&["run", "--skills", "skills", "text/count", "--nope=1"])
            .0,
        3
    ); // now
    band_snapshot!(
        env.output(&["history", "prune", "--older-than", "30d"]),
        "prune"
    );
    band_snapshot!(env.output(&["audit", "verify"]), "verify_after_prune");
    let (_, out, _) = env.band(&["history", "--json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out)
            .expect("json")
            .as_array()
            .map(Vec::len),
        Some(1),
        "checkpoints are not runs"
    );
    band_snapshot!(
        env.output(&["history", "prune", "--older-than", "30d"]),
        "prune_nothing"
    );
    // Deleting the first remaining record is still detected.
    let path = env.data().join("ledger.jsonl");
    let text = fs_err::read_to_string(&path).expect("read");
    fs_err::write(
        &path,
        text.lines()
            .skip(1)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .expect("write");
    assert_eq!(env.band(&["audit", "verify"]).0, 1);
}

fn server() -> PathBuf {
    Path::new(band_exe()).with_file_name("band-server")
}

#[test]
fn privileged_runs_record_events_and_io_only_on_request() {
    band_test::privileged!(crate::common::sandbox_missing());
    let env = Env::new();
    assert_eq!(env.band(&["lock", "skills/text"]).0, 0);
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--skills", "skills"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["text/count", "--text=hello audit"]);
        let mut cmd = env.command(&args);
        cmd.env("BAND_SERVER", server())
            .env("BAND_SERVER_STATE_DIR", band_test::STATE_DIR);
        Output::of(&mut cmd).parts()
    };
    let (code, out, err) = run(&[]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = run(&["--record-io"]);
    assert_eq!(code, 0, "{err}");
    let runs = env.runs();
    assert_eq!(runs.len(), 2);
    let lock = fs_err::read_to_string(env.skill().join("band.lock")).expect("lock");
    for r in &runs {
        assert_eq!(
            (r.status, r.exit_code, r.script_exit, r.lock),
            (Status::Ok, 0, Some(0), LockMark::Matches)
        );
        assert!(
            lock.contains(&format!("bundle {}\n", r.bundle_sha256)),
            "the ledger's fingerprint is the lock's"
        );
        assert!(r.metrics.run_ms > 0 || r.metrics.setup_ms > 0);
        assert!(
            matches!(r.events.first(), Some(Event::Started { .. })),
            "{:?}",
            r.events
        );
        assert!(
            r.events.iter().any(
                |e| matches!(e, Event::Cli(c) if c.argv.first().map(String::as_str) == Some("wc"))
            ),
            "{:?}",
            r.events
        );
        assert!(
            !r.events
                .iter()
                .any(|e| matches!(e, Event::Stdout { .. } | Event::Stderr { .. }))
        );
        assert_eq!(
            r.output.bytes,
            serde_json::to_vec(&serde_json::json!({"chars": 11, "lines": 1, "words": 2}))
                .expect("json")
                .len() as u64
        );
    }
    assert_eq!(
        (
            runs[0].input.data.as_ref(),
            runs[0].output.data.as_ref(),
            runs[0].stdout.as_ref()
        ),
        (None, None, None)
    );
    assert_eq!(
        runs[1].input.data,
        Some(serde_json::json!({"text": "hello audit"}))
    );
    assert_eq!(
        runs[1].output.data,
        Some(serde_json::json!({"chars": 11, "lines": 1, "words": 2}))
    );
    assert!(runs[1].stdout.is_some());
    // Not a snapshot: the script's pipelines (`wc -w | tr -d ' '`) log their commands in either
    // order, and `band show` lists the events in the order they came.
    let (code, out, _) = env.band(&["show", &runs[0].run_id]);
    assert_eq!(code, 0);
    assert!(
        out.contains("(matches band.lock)") && out.contains("cli allowed `wc"),
        "{out}"
    );
}

#[test]
fn the_repository_skills_match_their_locks() {
    let skills = repo().join("skills");
    let mut locked = 0;
    for e in fs_err::read_dir(&skills).expect("skills").flatten() {
        if !e.path().join("band.lock").is_file() {
            continue;
        }
        locked += 1;
        let mut cmd = Command::new(band_exe());
        cmd.arg("lock").arg("--check").arg(e.path());
        let (code, out, err) = Output::of(&mut cmd).parts();
        assert_eq!(
            code,
            0,
            "{out}{err}\nafter reviewing the change, run `band lock {}`",
            e.file_name().to_string_lossy()
        );
    }
    assert!(locked >= 1, "skills/text is locked");
}

/// A run whose start is on record but whose result is not (band was killed, or the ledger's
/// disk filled up after the start, issue 36) is not hidden: `band history` names it below the
/// table.
#[test]
fn history_names_a_run_that_started_and_recorded_no_result() {
    let env = Env::new();
    fixture(&env);
    env.ledger()
        .append(band::ledger::Entry::Start(band::ledger::RunStart {
            run_id: "00000000000000b1".into(),
            started_at_ms: 1_740_830_400_000 + 14_400_000,
            skill: "text".into(),
            script: "count".into(),
            target: "host".into(),
            band_sha256: "1".repeat(64),
            bundle_sha256: "2".repeat(64),
            policy_sha256: "3".repeat(64),
        }))
        .expect("append");
    let (code, out, err) = env.band(&["history", "--skill", "text"]);
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("history_unfinished", out);
    // A status filter asks for results: a run without one is not among them.
    // The fixture's ids and times are fixed: no filter, so the snapshot shows which runs.
    insta::assert_snapshot!(
        "history_status_ok_without_unfinished",
        env.output(&["history", "--status", "ok"]).shown()
    );
    // band show finds it by a prefix of its id, and says what is known.
    let (code, out, err) = env.band(&["show", "00000000000000b"]);
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("show_unfinished", out);
    let (code, out, err) = env.band(&["show", "--json", "00000000000000b1"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["run_id"], "00000000000000b1", "{out}");
    assert_eq!(v["skill"], "text", "{out}");
}
