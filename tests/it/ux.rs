//! What a run tells its user (issue 38, items 4 and 7): a repository reaches `/workspace` only
//! when the band names `.git`, read-only; refused writes and names that are not UTF-8 are said in
//! the final line; errors quote at most a little of a large input; a band-server config that
//! band-server refuses fails the run loudly.

use std::path::Path;

use band_test::{SkillBuilder, band_snapshot};

use crate::common::{bin, sandbox_missing};

/// `band run --skills ROOT --workspace WS SKILL/SCRIPT ARGS` from `root`.
fn run_in(root: &Path, ws: &Path, target: &str, args: &[&str]) -> band_test::Output {
    let (r, w) = (root.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let mut all = vec!["run", "--skills", r, "--workspace", w, target];
    all.extend(args);
    bin().output(&all, root)
}

fn git(ws: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", ws)
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

/// A skill `repo` whose script prints the repository's log and then writes into `.git`.
fn repo_skill(root: &Path, read: &str) {
    SkillBuilder::new("repo")
        .band(&format!(
            "description: Reads the repository.\nversion: 1\nallow:\n  cli: [\"git *\"]\n  \
             read: [{read}]\n  write: [\"**\"]\n"
        ))
        .script(
            "log.sh",
            "#!/bin/sh\ngit log --format=%s || exit 1\necho tampered > .git/hooks-evil\n\
             echo changed >> .git/HEAD\n",
        )
        .input_schema("log", SkillBuilder::NO_INPUT)
        .write(root);
}

#[test]
fn privileged_a_repository_is_read_only_and_only_when_the_band_names_git() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    git(&ws, &["init", "-q"]);
    fs_err::write(ws.join("a.txt"), "a\n").expect("write");
    git(&ws, &["add", "a.txt"]);
    git(&ws, &["commit", "-q", "-m", "first commit"]);
    let head = fs_err::read(ws.join(".git/HEAD")).expect("read");

    repo_skill(&skills, "\"**\", \".git/**\"");
    let out = run_in(&skills, &ws, "repo/log", &[]);
    band_snapshot!(out, "repo_git_log");
    // What the script wrote into `.git` stayed in the sandbox.
    assert!(!ws.join(".git/hooks-evil").exists());
    assert_eq!(fs_err::read(ws.join(".git/HEAD")).expect("read"), head);

    // `**` admits everything but names no `.git`: git sees no repository.
    repo_skill(&skills, "\"**\"");
    band_snapshot!(run_in(&skills, &ws, "repo/log", &[]), "repo_git_absent");
}

#[test]
fn privileged_a_refused_write_and_a_name_that_is_not_utf8_are_in_the_final_line() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("writer")
        .band("description: Writes out/.\nversion: 1\nallow:\n  write: [\"out/**\"]\n")
        .script(
            "w.sh",
            "#!/bin/sh\nmkdir -p out\necho ok > out/ok.txt\necho no > x.txt\n\
             echo bad > \"out/$(printf 'b\\377d').txt\"\n",
        )
        .input_schema("w", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "writer/w", &[]);
    band_snapshot!(out, "refused_writes_final_line");
    let mut names: Vec<Vec<u8>> = fs_err::read_dir(ws.join("out"))
        .expect("read_dir")
        .map(|e| {
            use std::os::unix::ffi::OsStrExt;
            e.expect("entry").file_name().as_bytes().to_vec()
        })
        .collect();
    names.sort();
    assert_eq!(names, vec![b"ok.txt".to_vec()]);
    assert!(!ws.join("x.txt").exists());
}

/// A folder of the workspace that is a symlink where the run wrote a file: band writes nothing
/// through it, and that file is a refused write on the run's result (its line, its final line,
/// its record), not an error that loses the script's output and leaves the ledger without the
/// run's end. The run's other files are written back.
#[test]
fn privileged_a_write_back_through_a_symlink_is_a_refused_write_not_a_lost_run() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws, elsewhere) = (
        t.path().join("skills"),
        t.path().join("ws"),
        t.path().join("elsewhere"),
    );
    fs_err::create_dir_all(&ws).expect("mkdir");
    fs_err::create_dir_all(&elsewhere).expect("mkdir");
    fs_err::os::unix::fs::symlink(&elsewhere, ws.join("out")).expect("symlink");
    SkillBuilder::new("writer")
        .band(
            "description: Writes out/ and logs/.\nversion: 1\nallow:\n  write: [\"out/**\", \"logs/**\"]\n",
        )
        .script(
            "w.sh",
            "#!/bin/sh\nmkdir -p out logs\necho report > out/report.txt\necho log > logs/run.txt\n\
             echo done\n",
        )
        .input_schema("w", SkillBuilder::NO_INPUT)
        .write(&skills);
    let data = t.path().join("data");
    let (s, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let out = bin().env("BAND_DATA_DIR", &data).output(
        &["run", "--skills", s, "--workspace", w, "writer/w"],
        &skills,
    );
    band_snapshot!(out, "write_back_through_a_symlink");
    assert_eq!(fs_err::read_dir(&elsewhere).expect("read_dir").count(), 0);
    assert_eq!(
        fs_err::read_to_string(ws.join("logs/run.txt")).expect("read"),
        "log\n"
    );
    // The ledger has the run's end, with the refused write and its reason.
    let history = bin()
        .env("BAND_DATA_DIR", &data)
        .output(&["history", "--json"], &skills);
    let runs: serde_json::Value = serde_json::from_str(&history.stdout).expect("history json");
    let run = &runs.as_array().expect("array")[0];
    assert_eq!(run["status"], "ok", "{run}");
    let denied = &run["denied"][0];
    assert_eq!(denied["kind"], "write", "{run}");
    assert_eq!(denied["path"], "out/report.txt", "{run}");
    assert!(
        denied["reason"]
            .as_str()
            .is_some_and(|r| r.contains("is a symlink")),
        "{run}"
    );
}

/// A symlink in the workspace that the band admits is not in the sandbox (band copies none in);
/// the run says so, rather than ending `band: ok` with a result that silently lacks it.
#[test]
fn privileged_a_symlink_the_band_admits_is_said_to_be_left_out() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    fs_err::write(ws.join("AGENTS.md"), "rules\n").expect("write");
    fs_err::os::unix::fs::symlink("AGENTS.md", ws.join("CLAUDE.md")).expect("symlink");
    SkillBuilder::new("docs")
        .band("description: Lists the docs.\nversion: 1\nallow:\n  read: [\"*.md\"]\n")
        .script("ls.sh", "#!/bin/sh\nfor f in *.md; do echo \"$f\"; done\n")
        .input_schema("ls", SkillBuilder::NO_INPUT)
        .write(&skills);
    band_snapshot!(run_in(&skills, &ws, "docs/ls", &[]), "symlink_left_out");
    let out = run_in(&skills, &ws, "docs/ls", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(
        v["links_left_out"],
        serde_json::json!({"named": ["CLAUDE.md"], "count": 1}),
        "{v}"
    );
}

#[test]
fn privileged_an_invalid_server_config_fails_the_run_loudly() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("noop")
        .band("description: Does nothing.\nversion: 1\n")
        .script("n.sh", "#!/bin/sh\necho hi\n")
        .input_schema("n", SkillBuilder::NO_INPUT)
        // A request larger than a pipe's buffer: band is still writing when band-server exits.
        .file("data/big.txt", 0o644, &"x".repeat(1 << 20))
        .write(&skills);
    let config = t.path().join("server.toml");
    fs_err::write(&config, "dns_upstream = \"127.0.0.1:9\"\n").expect("write");
    let (s, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let out = bin()
        .env("BAND_SERVER_CONFIG", &config)
        .output(&["run", "--skills", s, "--workspace", w, "noop/n"], &skills);
    band_snapshot!(out, "invalid_server_config");
    // What an agent reads: the failure and its cause as the JSON result, never an empty stdout
    // and exit 0 (band took the broken pipe to band-server for its own stdout closed).
    for _ in 0..5 {
        let out = bin().env("BAND_SERVER_CONFIG", &config).output(
            &["run", "--json", "--skills", s, "--workspace", w, "noop/n"],
            &skills,
        );
        band_snapshot!(out, "invalid_server_config_json");
    }
}

/// A 10 MB input that breaks its contract: the error quotes a little of it, wherever it goes
/// (stderr, `--json`, the MCP error result) and the ledger keeps no contents.
#[test]
fn an_error_quotes_at_most_a_little_of_a_large_input() {
    const KB: usize = 1024;
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws, data) = (
        t.path().join("skills"),
        t.path().join("ws"),
        t.path().join("data"),
    );
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("num")
        .band("description: Takes a number.\nversion: 1\n")
        .script("n.sh", "#!/bin/sh\necho hi\n")
        .input_schema(
            "n",
            r#"{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}"#,
        )
        .write(&skills);
    let big = "a".repeat(10 << 20);
    let input = t.path().join("input.json");
    fs_err::write(&input, serde_json::json!({ "n": big }).to_string()).expect("write");
    let band = bin().env("BAND_DATA_DIR", &data);
    let (s, w, i) = (
        skills.to_str().expect("utf-8"),
        ws.to_str().expect("utf-8"),
        input.to_str().expect("utf-8"),
    );
    let plain = band.output(
        &[
            "run",
            "--skills",
            s,
            "--workspace",
            w,
            "--input-file",
            i,
            "num/n",
        ],
        &skills,
    );
    assert_eq!(
        plain.code,
        3,
        "{}",
        &plain.stderr[..plain.stderr.len().min(2000)]
    );
    assert!(
        plain.stderr.len() < 2 * KB,
        "{} bytes on stderr",
        plain.stderr.len()
    );
    assert!(
        plain
            .stderr
            .contains("… (10485762 bytes) is not of type \"integer\""),
        "{}",
        plain.stderr
    );
    let json = band.output(
        &[
            "run",
            "--json",
            "--skills",
            s,
            "--workspace",
            w,
            "--input-file",
            i,
            "num/n",
        ],
        &skills,
    );
    assert_eq!(json.code, 3);
    assert!(
        json.stdout.len() < 4 * KB,
        "{} bytes of --json",
        json.stdout.len()
    );
    let ledger = fs_err::read_to_string(data.join("ledger.jsonl")).expect("ledger");
    assert_eq!(ledger.lines().count(), 2, "one record per run");
    for record in ledger.lines() {
        assert!(
            record.len() < 4 * KB,
            "a ledger record of {} bytes",
            record.len()
        );
        assert!(!record.contains(&"a".repeat(201)), "{record}");
    }
    let (mut mcp, _) = crate::mcp::Raw::start_in(&[&skills], &ws, &[], bin());
    let result = mcp.request(
        "tools/call",
        serde_json::json!({"name": "num__n", "arguments": {"n": big}}),
    );
    let text = result.to_string();
    assert_eq!(result["isError"], true, "{}", &text[..text.len().min(2000)]);
    assert!(
        text.len() < 4 * KB,
        "an MCP error result of {} bytes",
        text.len()
    );
}

/// A rule that reaches `.git` or `target` only through a wildcard, and a write rule naming
/// `.git`: each a warning that says what is never copied and how to name it.
#[test]
fn lint_warns_of_rules_reaching_folders_never_copied() {
    let t = tempfile::tempdir().expect("tempdir");
    let skill = SkillBuilder::new("repo")
        .band(
            "description: Reads the repository.\nversion: 1\nallow:\n  \
             read: [\".git/**\", \"**/.git/**\", \"*/target/**\"]\n  write: [\".git/**\"]\n",
        )
        .script("log.sh", "#!/bin/sh\necho hi\n")
        .input_schema("log", SkillBuilder::NO_INPUT)
        .write(t.path());
    let out = bin().output(&["lint", skill.to_str().expect("utf-8")], t.path());
    band_snapshot!(out, "lint_never_copied");
}

/// A setup script that installs beside itself (`mkdir "$SKILL_DIR/.deps"`, as mermaid-studio's
/// does) fails on the read-only `/skill`: band says why, and what to do instead.
#[test]
fn privileged_a_script_writing_into_its_skill_folder_is_told_why_it_cannot() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("deps")
        .band("description: Installs its packages.\nversion: 1\n")
        .script("setup.sh", "#!/bin/sh\nmkdir -p /skill/.deps\n")
        .input_schema("setup", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "deps/setup", &[]);
    band_snapshot!(out, "write_into_the_skill_folder");
}

/// A run that tested for a folder its band hides (`[ -d libs ]`) ends ok with another result than
/// the host's; its output names the folder, so band says the run went without it, and the rule.
/// A file the run wrote, named in its output, is not said to be left out.
#[test]
fn privileged_an_ok_run_that_names_a_folder_the_band_hid_says_so() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(ws.join("libs/core")).expect("mkdir");
    fs_err::write(ws.join("libs/core/a.ts"), "// TODO-CONTENTS\n").expect("write");
    fs_err::write(ws.join("in.txt"), "x\n").expect("write");
    SkillBuilder::new("tree")
        .band(
            "description: Checks a tree.\nversion: 1\nallow:\n  read: [\"./in.txt\"]\n  \
             write: [\"out/**\"]\n",
        )
        .script(
            "check.sh",
            "#!/bin/sh\nmkdir -p out; wc -l < in.txt > out/count.txt; echo \"wrote out/count.txt\"\n\
             if [ -d libs ]; then echo \"libs: checked\"; else echo \"libs: skipped (no libs/ directory found)\"; fi\n",
        )
        .input_schema("check", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "tree/check", &[]);
    band_snapshot!(out, "ok_run_names_a_hidden_folder");
    assert!(!out.stdout.contains("TODO-CONTENTS") && !out.stderr.contains("TODO-CONTENTS"));
}

/// A folder `allow.write` opens that the workspace does not have is not there for the script
/// (wild trial 4: a scaffolder said "my-package already exists" on an empty workspace): the
/// script makes it, as on the host. The folder above it is opened for new entries only: the
/// run cannot remove a workspace file there, and what it makes there outside `allow.write` does
/// not come back.
#[test]
fn privileged_a_write_folder_the_workspace_lacks_is_made_by_the_script() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    fs_err::write(ws.join("README.md"), "keep me\n").expect("write");
    SkillBuilder::new("scaffold")
        .band(
            "description: Makes a package.\nversion: 1\nallow:\n  read: [\"README.md\"]\n  write: [\"my-package/**\"]\n",
        )
        .script(
            "new.sh",
            "#!/bin/sh\n[ -e my-package ] && { echo \"Error: my-package already exists.\" >&2; exit 1; }\n\
             mkdir -p my-package/src && echo x > my-package/src/__init__.py\n\
             rm -f README.md 2>/dev/null; [ -f README.md ] && echo \"readme: kept\"\n\
             mv README.md moved.md 2>/dev/null || echo \"readme: not moved\"\n\
             touch stray.txt && echo \"stray: made in the run\"\n",
        )
        .input_schema("new", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "scaffold/new", &[]);
    assert!(
        out.stdout
            .contains("readme: kept\nreadme: not moved\nstray: made in the run\n"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("already exists"), "{out:?}");
    assert_eq!(
        fs_err::read_to_string(ws.join("my-package/src/__init__.py")).expect("written back"),
        "x\n"
    );
    assert_eq!(
        fs_err::read_to_string(ws.join("README.md")).expect("kept"),
        "keep me\n"
    );
    assert!(!ws.join("stray.txt").exists() && !ws.join("moved.md").exists());
    assert!(out.stderr.contains("stray.txt"), "{out:?}");
}

/// A scaffolder whose whole result is empty folders (a wild trial: spark-video's `episode
/// --init` made 9 folders, reported `band: ok` and wrote nothing back, where the host run made
/// them): the folders `allow.write` admits are made in the workspace, and one it does not is a
/// refused write, named, never dropped without a word. `--json` and `--trace` name them too.
#[test]
fn privileged_the_empty_folders_a_script_makes_are_written_back() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("episode")
        .band("description: Scaffolds an episode.\nversion: 1\nallow:\n  write: [\"projects/**\"]\n")
        .script(
            "init.sh",
            "#!/bin/sh\nset -e\nfor d in audio video notes; do mkdir -p projects/demo/episode-01/$d; done\n\
             mkdir stray\n",
        )
        .input_schema("init", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "episode/init", &[]);
    band_snapshot!(out, "empty_folders_written_back");
    for d in ["audio", "video", "notes"] {
        let at = ws.join("projects/demo/episode-01").join(d);
        assert!(at.is_dir(), "{at:?}: {out:?}");
        assert_eq!(fs_err::read_dir(&at).expect("read_dir").count(), 0);
    }
    assert!(!ws.join("stray").exists(), "{out:?}");

    // In fresh workspaces: `--json` lists them, `--trace` counts and names them.
    let k = skills.to_str().expect("utf-8");
    let fresh = |name: &str| {
        let at = t.path().join(name);
        fs_err::create_dir_all(&at).expect("mkdir");
        at.to_str().expect("utf-8").to_string()
    };
    let w = fresh("ws-json");
    let json = bin().output(
        &[
            "run",
            "--json",
            "--skills",
            k,
            "--workspace",
            &w,
            "episode/init",
        ],
        &skills,
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(
        v["written_folders"],
        serde_json::json!([
            "projects/demo/episode-01/audio",
            "projects/demo/episode-01/notes",
            "projects/demo/episode-01/video"
        ]),
        "{json:?}"
    );
    assert_eq!(v["written_files"], serde_json::json!([]), "{json:?}");
    assert_eq!(
        v["denied"],
        serde_json::json!([{"kind": "write", "path": "stray/", "rule": null}]),
        "{json:?}"
    );
    let w = fresh("ws-trace");
    let traced = bin().output(
        &[
            "run",
            "--trace",
            "--skills",
            k,
            "--workspace",
            &w,
            "episode/init",
        ],
        &skills,
    );
    band_snapshot!(traced, "empty_folders_written_back_trace");
}

/// A script's JSON on stdout comes out of `band run` as the script wrote it, its keys in the
/// script's order (sixth wild trial: a sample written with `> file` came back with its keys
/// sorted and re-indented).
#[test]
fn privileged_a_scripts_json_on_stdout_is_printed_as_written() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("sample")
        .band("description: Prints a sample.\nversion: 1\n")
        .script(
            "make.sh",
            "#!/bin/sh\nprintf '{\"zeta\": 1, \"alpha\": {\"b\": 2, \"a\": 3}}\\n'\n",
        )
        .input_schema("make", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "sample/make", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout, "{\"zeta\": 1, \"alpha\": {\"b\": 2, \"a\": 3}}\n",
        "{out:?}"
    );
}

/// A run is in the host's time zone: its `/etc/localtime` and `/etc/timezone` are the host's
/// (sixth wild trial: every run was in UTC, so date-stamped names and fields differed from the
/// host's). Compared by content, so that the test means the same on a host in UTC.
#[test]
fn privileged_a_run_has_the_hosts_time_zone() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("tz")
        .band("description: Tells the zone.\nversion: 1\nallow:\n  cli: [\"python3 /skill/scripts/zone.py *\"]\n")
        .script(
            "zone.py",
            "import hashlib\n\
             for f in ('/etc/localtime', '/etc/timezone'):\n    \
                 try:\n        \
                     print(f, hashlib.sha256(open(f, 'rb').read()).hexdigest())\n    \
                 except FileNotFoundError:\n        \
                     print(f, 'none')\n",
        )
        .input_schema("zone", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "tz/zone", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    for f in ["/etc/localtime", "/etc/timezone"] {
        let host = match fs_err::read(f) {
            Ok(bytes) => band::deps::sha256_hex(&bytes),
            Err(_) => "none".to_string(),
        };
        assert!(
            out.stdout.contains(&format!("{f} {host}\n")),
            "{f}: {out:?}"
        );
    }
}

/// `/dev/shm` is the run's, writable and noexec, as `/tmp` (sixth wild trial: a smoke test's
/// `multiprocessing.Queue` failed with "Read-only file system", every case, where the host passed
/// all): Python's `multiprocessing` semaphores and queues work, and a program written there does
/// not run.
#[test]
fn privileged_multiprocessing_works_and_dev_shm_is_noexec() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("mp")
        .band("description: Works in parallel.\nversion: 1\nallow:\n  cli: [\"python3 /skill/scripts/pool.py *\"]\n")
        .script(
            "pool.py",
            "import multiprocessing as mp, os\n\
             q = mp.Queue()\n\
             q.put(41)\n\
             with mp.Pool(2) as p:\n    \
                 print('pool', sum(p.map(abs, [-1, -2, -3])), 'queue', q.get() + 1)\n\
             open('/dev/shm/t', 'w').write('#!/bin/sh\\necho ran\\n')\n\
             os.chmod('/dev/shm/t', 0o755)\n\
             try:\n    \
                 os.execv('/dev/shm/t', ['t'])\n\
             except PermissionError:\n    \
                 print('exec refused')\n",
        )
        .input_schema("pool", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "mp/pool", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("pool 6 queue 42"), "{out:?}");
    assert!(out.stdout.contains("exec refused"), "{out:?}");
}

/// The folders a band's write rules open are the run's (sixth wild trial):
/// - `state/**` admits the folder `state` the run makes and leaves empty: it comes back, and the
///   run is no `denied` (it was, exit 5, and said `allow.write "./state/"`);
/// - `out/**` with `out/x/y/**` makes `out/x` the run's too (it was root's: `mkdir out/x/new`
///   failed with permission denied);
/// - neither folder is named as one "in the workspace but not copied in".
#[test]
fn privileged_the_folders_write_rules_open_are_the_runs() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(ws.join("out/x/y")).expect("mkdir");
    fs_err::write(ws.join("out/x/y/keep"), "k").expect("write");
    SkillBuilder::new("state")
        .band(
            "description: Keeps state.\nversion: 1\nallow:\n  write: [\"state/**\", \"out/**\", \"out/x/y/**\"]\n",
        )
        .script(
            "init.sh",
            "#!/bin/sh\nset -e\nmkdir -p state\nmkdir out/x/new\necho hi > out/x/new/f.txt\n\
             echo made state/ and out/x/new/\n",
        )
        .input_schema("init", SkillBuilder::NO_INPUT)
        .write(&skills);
    let (k, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let json = bin().output(
        &[
            "run",
            "--json",
            "--skills",
            k,
            "--workspace",
            w,
            "state/init",
        ],
        &skills,
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(v["status"], "ok", "{json:?}");
    assert_eq!(v["denied"], serde_json::json!([]), "{json:?}");
    assert_eq!(
        v["written_folders"],
        serde_json::json!(["state"]),
        "{json:?}"
    );
    assert_eq!(
        v["written_files"],
        serde_json::json!(["out/x/new/f.txt"]),
        "{json:?}"
    );
    assert!(
        v["not_admitted"].as_array().is_none_or(|a| a.is_empty()),
        "{json:?}"
    );
    assert!(ws.join("state").is_dir());
    assert_eq!(
        fs_err::read_to_string(ws.join("out/x/new/f.txt")).expect("written back"),
        "hi\n"
    );
}

/// A script that writes where its band does not let it (a learned `alpha/**`, then a run asked
/// for `beta`) is refused by the filesystem in the copy, and says so in its own words: band
/// names the path after the run, with the `allow.write` rule that would let it (wild trial: a
/// bare `PermissionError`, nothing on the write side).
#[test]
fn privileged_a_write_the_band_does_not_admit_is_named_with_its_rule() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(ws.join("alpha")).expect("mkdir");
    SkillBuilder::new("pkg")
        .band("description: Makes a package.\nversion: 1\nallow:\n  write: [\"alpha/**\"]\n")
        .script(
            "new.sh",
            "#!/bin/sh\necho x > alpha/ok.txt || exit 2\nmkdir beta || exit 1\n",
        )
        .script("sub.sh", "#!/bin/sh\nmkdir alpha/sub || exit 1\n")
        .input_schema("new", SkillBuilder::NO_INPUT)
        .input_schema("sub", SkillBuilder::NO_INPUT)
        .write(&skills);
    let out = run_in(&skills, &ws, "pkg/new", &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(
            "hint: the script was refused writing `beta` (permission denied): the workspace copy is writable only where allow.write admits it; to let the script write it: allow.write \"beta/**\"\n"
        ),
        "{out:?}"
    );
    let (k, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let json = bin().output(
        &["run", "--json", "--skills", k, "--workspace", w, "pkg/new"],
        &skills,
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(
        v["not_writable"],
        serde_json::json!([{"path": "beta", "rule": "beta/**"}]),
        "{json:?}"
    );
    // Where the band admits the write, no hint.
    let fine = run_in(&skills, &ws, "pkg/sub", &[]);
    assert_eq!(fine.code, 0, "{fine:?}");
    assert!(!fine.stderr.contains("refused writing"), "{fine:?}");
}

/// A command the band allows that the host does not have is told after the run, once, as a note
/// (a script that falls back quietly shows it nowhere else); after a failed one, without saying
/// it was the cause (a fifth wild trial: a hint after failures named a sibling's `pwsh`, which
/// the failed script never called); the script's stderr stays the script's.
#[test]
fn privileged_an_allowed_command_the_host_lacks_is_told_after_the_run() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("pick")
        .band(
            "description: Picks a tool.\nversion: 1\nallow:\n  cli:\n    - \"bandtestabsent *\"\n    - \"bandtestgone --version\"\n",
        )
        .script(
            "quiet.sh",
            "#!/bin/bash\nif command -v bandtestabsent >/dev/null; then echo found; else echo \"using the fallback\"; fi\n",
        )
        .script(
            "loud.sh",
            "#!/bin/bash\nbandtestabsent --list 2>/dev/null || { echo \"no tool\" >&2; exit 3; }\n",
        )
        .input_schema("quiet", SkillBuilder::NO_INPUT)
        .input_schema("loud", SkillBuilder::NO_INPUT)
        .write(&skills);
    let ok = run_in(&skills, &ws, "pick/quiet", &[]);
    band_snapshot!(ok, "missing_command_note");
    let failed = run_in(&skills, &ws, "pick/loud", &[]);
    band_snapshot!(failed, "missing_command_hint");
}

/// A failed run that looked for a workspace file the band does not admit names it, with the
/// rule to add; the file's contents appear nowhere.
#[test]
fn privileged_a_failed_run_names_the_workspace_file_it_could_not_see() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(ws.join("notes")).expect("mkdir");
    fs_err::write(ws.join("refs.bib"), "TOPSECRET-CONTENTS").expect("write");
    fs_err::write(ws.join("notes/a.md"), "x").expect("write");
    SkillBuilder::new("bib")
        .band("description: Formats a bibliography.\nversion: 1\n")
        .script(
            "fmt.sh",
            "#!/bin/sh\nf=$(cat \"$INPUT_PATH\")\n\
             [ -f refs.bib ] || { echo \"Error reading file: [Errno 2] No such file or directory: 'refs.bib'\" >&2; exit 1; }\n",
        )
        .input_schema(
            "fmt",
            r#"{"type":"object","properties":{"dir":{"type":"string"}},"additionalProperties":false}"#,
        )
        .write(&skills);
    let out = run_in(&skills, &ws, "bib/fmt", &["--dir=notes"]);
    band_snapshot!(out, "not_admitted_hint");
    let (s, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let json = bin().output(
        &[
            "run",
            "--json",
            "--skills",
            s,
            "--workspace",
            w,
            "bib/fmt",
            "--dir=notes",
        ],
        &skills,
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(
        v["not_admitted"],
        serde_json::json!([
            {"path": "notes", "rule": "notes/**"},
            {"path": "refs.bib", "rule": "./refs.bib"},
        ])
    );
    assert!(!json.stdout.contains("TOPSECRET") && !json.stderr.contains("TOPSECRET"));
}

/// A skill that serves on a local port (a gallery on `127.0.0.1:8765`, waiting for a browser)
/// is never reached: a run takes no inbound connections. It ends at `maxRuntimeMs`, and band
/// says what it was still listening on: in the limit's line, in a hint after the run, in the
/// result's `listening` and in band learn's notes (wild trial: the user saw "timeout" and nothing
/// else).
#[test]
fn privileged_a_run_that_times_out_serving_a_port_says_where_it_listened() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    SkillBuilder::new("gallery")
        .band("description: Serves a gallery.\nversion: 1\nallow:\n  cli: [\"python3 /skill/scripts/serve.py *\"]\n\
             limit:\n  maxRuntimeMs: 5s\n")
        .script(
            "serve.py",
            "import socket, sys, time\n\
             s = socket.socket()\n\
             s.bind((\"127.0.0.1\", 8765))\n\
             s.listen()\n\
             print(\"serving on http://127.0.0.1:8765/\", file=sys.stderr, flush=True)\n\
             time.sleep(600)\n",
        )
        .input_schema("serve", SkillBuilder::NO_INPUT)
        .write(&skills);
    // The two runs at once: each waits out its limit.
    let json = std::thread::scope(|s| {
        let json = s.spawn(|| {
            let (k, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
            bin().output(
                &[
                    "run",
                    "--json",
                    "--skills",
                    k,
                    "--workspace",
                    w,
                    "gallery/serve",
                ],
                &skills,
            )
        });
        // band learn's observing run waits out the same limit, and its notes say why.
        let learned = s.spawn(|| {
            let (k, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
            bin().output(
                &[
                    "learn",
                    "--json",
                    "--skills",
                    k,
                    "--workspace",
                    w,
                    "gallery/serve",
                ],
                &skills,
            )
        });
        let out = run_in(&skills, &ws, "gallery/serve", &[]);
        band_snapshot!(out, "timeout_while_listening");
        let learned = learned.join().expect("the learn run");
        let doc: serde_json::Value = serde_json::from_str(&learned.stdout).expect("learn json");
        assert_eq!(doc["status"], "timeout", "{learned:?}");
        let notes = doc["notes"].to_string();
        assert!(
            notes.contains("the script was still listening on 127.0.0.1:8765 when it timed out"),
            "{notes}"
        );
        json.join().expect("the --json run")
    });
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(v["status"], "timeout", "{json:?}");
    assert_eq!(
        v["listening"],
        serde_json::json!(["127.0.0.1:8765"]),
        "{json:?}"
    );
}

/// In a run with `allow.net`, band listens in the run's namespace too: the DNS stub, the relay
/// of a loopback port the band names (`localhost:18000`, which the script therefore cannot
/// serve on itself) and the egress proxy of an HTTP rule. A run that times out is said to
/// listen on its own ports only.
#[test]
fn privileged_a_networked_run_that_times_out_names_its_listeners_not_bands() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    // The DNS stub asks only a resolver of ours: a dead loopback port.
    let cfg = t.path().join("server.toml");
    fs_err::write(&cfg, "dns_upstream = [\"127.0.0.1:9\"]\n").expect("write");
    SkillBuilder::new("dev")
        .band(
            "description: Serves a dev server.\nversion: 1\nallow:\n  cli: [\"python3 /skill/scripts/serve.py *\"]\n  net:\n    - \"localhost:18000\"\n    \
             - \"GET https://api.example.test/v1/**\"\nlimit:\n  maxRuntimeMs: 5s\n",
        )
        .script(
            "serve.py",
            "import socket, sys, time\n\
             try:\n    \
                 taken = socket.socket()\n    \
                 taken.bind((\"127.0.0.1\", 18000))\n    \
                 print(\"18000: free\", flush=True)\n\
             except OSError as e:\n    \
                 print(\"18000: in use\" if e.errno == 98 else e, flush=True)\n\
             s = socket.socket(socket.AF_INET6)\n\
             s.bind((\"::\", 3000))\n\
             s.listen()\n\
             time.sleep(600)\n",
        )
        .input_schema("serve", SkillBuilder::NO_INPUT)
        .write(&skills);
    let (k, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let out = bin().env("BAND_SERVER_CONFIG", &cfg).output(
        &[
            "run",
            "--json",
            "--skills",
            k,
            "--workspace",
            w,
            "dev/serve",
        ],
        &skills,
    );
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(v["status"], "timeout", "{out:?}");
    assert_eq!(v["stdout"], "18000: in use\n", "{out:?}");
    assert_eq!(v["listening"], serde_json::json!(["[::]:3000"]), "{out:?}");
}
