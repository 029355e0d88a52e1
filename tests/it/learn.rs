//! `band learn`: from an emptied band, one observed run drafts the narrowest band that runs the
//! script again, no wider than the band the skill ships with; and on a script of our own, exactly
//! what it did (one file read, one written, two commands, one name looked up), nothing it did not.

use std::path::{Path, PathBuf};

use band::policy::Category;
use band::policy::cli::CliPattern;
use band::policy::fs::FsPattern;
use band::policy::net::NetPattern;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use band_test::SkillBuilder;

use crate::common::{bin, make_ca_and_cert, repo, sandbox_missing, unbanded_demo};

/// A copy of `skills/<skill>` under `dir/skills`, with every allow list and env.secrets of the
/// band that governs `script` emptied. Returns that band file.
fn emptied_copy(src: &Path, dir: &Path, skill: &str, script: &str) -> PathBuf {
    let to = dir.join("skills").join(skill);
    copy_dir(&src.join("skills").join(skill), &to);
    let _ = fs_err::remove_file(to.join("band.lock"));
    let (sk, _) = band::skill::load_skill(&to);
    let mut file = sk.band_file_for(script).expect("a band governs the script");
    // A pointer (`path: ../bands/write.band.md`) leads to the band that governs the script.
    let mut text = fs_err::read_to_string(&file).expect("read band");
    if let Some(rel) = text
        .lines()
        .take_while(|l| *l != "---" || text.starts_with(l))
        .find_map(|l| l.strip_prefix("path: "))
    {
        file = file.parent().expect("folder").join(rel.trim());
        text = fs_err::read_to_string(&file).expect("read pointed band");
    }
    for cat in Category::ALL {
        text = band::learn::edit::set_list(&text, "allow", cat.as_str(), &[]).expect("edit");
    }
    text = band::learn::edit::set_list(&text, "env", "secrets", &[]).expect("edit");
    // A secret required must be declared: emptied with them.
    if text.contains("\nrequires:") {
        text = band::learn::edit::set_list(&text, "requires", "secrets", &[]).expect("edit");
    }
    fs_err::write(&file, text).expect("write band");
    file
}

fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).expect("mkdir");
    for e in fs_err::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let t = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            fs_err::copy(e.path(), &t).expect("copy");
        }
    }
}

/// Every allow rule of the band that now governs `script` in `dir` is covered by a rule of the
/// shipped band in `src` (the learned band is no wider).
fn assert_no_wider(src: &Path, dir: &Path, skill: &str, script: &str) {
    let policy = |root: &Path| {
        let (sk, _) = band::skill::load_skill(root);
        band::skill::resolve_script(&sk, script)
            .0
            .expect("resolves")
            .policy
    };
    let learned = policy(&dir.join("skills").join(skill));
    let shipped = policy(&src.join("skills").join(skill));
    for r in &learned.allow.cli {
        let p = CliPattern::parse(r).expect("learned cli rule parses");
        assert!(
            shipped
                .allow
                .cli
                .iter()
                .any(|s| CliPattern::parse(s).is_ok_and(|s| s.covers(&p)) || class_covers(s, r)),
            "{skill}/{script}: learned `{r}` is wider than {:?}",
            shipped.allow.cli
        );
    }
    for (cat, learned, shipped) in [
        ("read", &learned.allow.read, &shipped.allow.read),
        ("write", &learned.allow.write, &shipped.allow.write),
    ] {
        for r in learned {
            let p = FsPattern::parse(r).expect("learned path rule parses");
            assert!(
                shipped
                    .iter()
                    .any(|s| FsPattern::parse(s).is_ok_and(|s| s.covers(&p))),
                "{skill}/{script}: learned {cat} `{r}` is wider than {shipped:?}"
            );
        }
    }
    for r in &learned.allow.net {
        let p = NetPattern::parse(r).expect("learned net rule parses");
        assert!(
            shipped
                .allow
                .net
                .iter()
                .any(|s| NetPattern::parse(s).is_ok_and(|s| s.covers(&p))),
            "{skill}/{script}: learned net `{r}` is wider than {:?}",
            shipped.allow.net
        );
    }
    for s in &learned.secrets {
        assert!(
            shipped.secrets.contains(s),
            "{skill}/{script}: learned secret {s} is not the shipped band's"
        );
    }
}

/// The one-word classes band learn drafts, narrowest first: each matches less than the next.
const CLASSES: [&str; 4] = ["[0-9]*", "[A-Za-z0-9]*", "[!-]*", "*"];

/// Whether the cli pattern `shipped` matches every argv `learned` does, word by word, where
/// [`CliPattern::covers`] (conservative) cannot tell: a word of `learned` is the same, or a
/// literal the shipped word matches, or a class of [`CLASSES`] no wider than the shipped one
/// (after the same literal prefix). Patterns with quoted words are left to `covers`.
fn class_covers(shipped: &str, learned: &str) -> bool {
    if shipped.contains('"') || learned.contains('"') {
        return false;
    }
    let (s, l): (Vec<&str>, Vec<&str>) = (
        shipped.split_whitespace().collect(),
        learned.split_whitespace().collect(),
    );
    let rest = s.len() > 1 && s.last() == Some(&"*");
    let body = if rest { &s[..s.len() - 1] } else { &s[..] };
    let shape = if rest {
        l.len() >= body.len()
    } else {
        l.len() == body.len() && l.last() != Some(&"*")
    };
    let class = |t: &str| {
        CLASSES
            .iter()
            .enumerate()
            .filter_map(|(i, c)| t.strip_suffix(c).map(|p| (p.to_string(), i)))
            .find(|(p, _)| !p.contains(['*', '?', '[', ']', '{', '}', '\\']))
    };
    shape
        && body.iter().zip(&l).enumerate().all(|(i, (s, l))| {
            if s == l || *s == "*" {
                return true;
            }
            if i > 0 && !l.contains(['*', '?', '[', ']', '{', '}', '\\']) {
                return CliPattern::parse(&format!("x {s}"))
                    .is_ok_and(|p| p.matches(&["x".to_string(), l.to_string()]));
            }
            // `{a,b}*` covers a literal prefix that starts with `a` or `b`, then anything.
            if let Some(alts) = s.strip_prefix('{').and_then(|x| x.strip_suffix("}*"))
                && let Some((pl, _)) = class(l)
                && !alts.contains(['*', '?', '[', ']', '{', '}', '\\'])
            {
                return alts.split(',').any(|a| pl.starts_with(a));
            }
            // A class alone constrains only the first character: it covers a literal prefix it
            // matches, then anything.
            if let (Some((ps, _)), Some((pl, _))) = (class(s), class(l))
                && ps.is_empty()
                && !pl.is_empty()
            {
                return CliPattern::parse(&format!("x {s}"))
                    .is_ok_and(|p| p.matches(&["x".to_string(), pl]));
            }
            matches!((class(s), class(l)), (Some((ps, a)), Some((pl, b))) if ps == pl && b <= a)
        })
}

#[test]
fn the_class_ladder_covers_only_narrower_classes() {
    assert!(class_covers("gh -- [A-Za-z0-9]*", "gh -- octo/*"));
    assert!(!class_covers("gh -- [0-9]*", "gh -- octo/*"));
    assert!(class_covers(
        "jq -c [!-]* /tmp/d.json",
        "jq -c [A-Za-z0-9]* /tmp/d.json"
    ));
    assert!(class_covers(
        "gh api --x=* -- [0-9]*",
        "gh api --x=* -- [0-9]*"
    ));
    assert!(class_covers(
        "curl -- https://*",
        "curl -- https://[A-Za-z0-9]*"
    ));
    assert!(!class_covers(
        "jq -c [0-9]* /tmp/d.json",
        "jq -c [!-]* /tmp/d.json"
    ));
    assert!(!class_covers(
        "jq -c [!-]* /tmp/d.json",
        "jq -c * /tmp/d.json"
    ));
    assert!(!class_covers("jq -c [!-]*", "jq -c [!-]* *"));
    assert!(class_covers("gh api {repos,users}*", "gh api repos/*"));
    assert!(!class_covers(
        "gh api {repos,users}*",
        "gh api [A-Za-z0-9]*"
    ));
}

/// Learn `skill/script` from an emptied band, then run it with the draft: same output as the
/// shipped skill gives, and no wider a band.
fn learn_and_rerun(skill: &str, script: &str, input: &[&str], workspace: Option<&Path>) {
    let cfg = dead_dns();
    learn_and_rerun_with(
        &|args, cwd| bin().env("BAND_SERVER_CONFIG", cfg.path()).run(args, cwd),
        skill,
        script,
        input,
        workspace,
    );
}

/// A band-server config whose DNS stub asks a loopback port nobody listens on (the learning
/// band allows one name, so its runs start the stub): no name resolves, nothing leaves.
fn dead_dns() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().expect("tmp");
    fs_err::write(f.path(), "dns_upstream = [\"127.0.0.1:9\"]\n").expect("write config");
    f
}

/// `band <args>` in `dir`, with band-server's DNS stub on `cfg` ([`dead_dns`]).
fn band_in(cfg: &tempfile::NamedTempFile, dir: &Path, args: &[&str]) -> (i32, String, String) {
    bin().env("BAND_SERVER_CONFIG", cfg.path()).run(args, dir)
}

/// `band <args>` in `cwd`, as [`learn_and_rerun_with`] runs it.
type Runner<'a> = dyn Fn(&[&str], &Path) -> (i32, String, String) + 'a;

/// [`learn_and_rerun`] with every `band` command run by `runner`.
fn learn_and_rerun_with(
    runner: &Runner<'_>,
    skill: &str,
    script: &str,
    input: &[&str],
    workspace: Option<&Path>,
) {
    learn_and_rerun_from(repo(), runner, skill, script, input, workspace);
}

/// What [`learn_and_rerun_from`] leaves: the folder holding the learned `skills/`, and the band
/// file it wrote.
struct Learned {
    dir: tempfile::TempDir,
    band_file: PathBuf,
}

/// [`learn_and_rerun_with`] for the skill shipped as `src/skills/<skill>` (a copy with its
/// config block filled in, as a user deploys it).
fn learn_and_rerun_from(
    src: &Path,
    runner: &Runner<'_>,
    skill: &str,
    script: &str,
    input: &[&str],
    workspace: Option<&Path>,
) -> Learned {
    let band_in = |dir: &Path, args: &[&str]| {
        let skills = dir.join("skills").display().to_string();
        let mut full: Vec<&str> = vec![args[0], "--skills", &skills];
        full.extend(&args[1..]);
        runner(&full, dir)
    };
    let t = tempfile::tempdir().expect("tmp");
    let band_file = emptied_copy(src, t.path(), skill, script);
    let ws = workspace
        .map(Path::to_path_buf)
        .unwrap_or_else(|| t.path().to_path_buf());
    let ws_s = ws.display().to_string();
    // The shipped band's run gets its own copy of the workspace as it was (a script that writes
    // back would otherwise find its earlier output).
    let fresh = |dir: &tempfile::TempDir| {
        if workspace.is_some() {
            copy_dir(&ws, dir.path());
            dir.path().display().to_string()
        } else {
            ws_s.clone()
        }
    };
    let (shipped_ws, locked_ws) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let shipped_ws_s = fresh(&shipped_ws);
    let locked_ws_s = fresh(&locked_ws);
    let target = format!("{skill}/{script}");

    let mut before = vec!["run", "--json", "--workspace", &ws_s, &target];
    before.extend(input);
    let (code, denied, err) = band_in(t.path(), &before);
    assert_ne!(code, 0, "{target} ran with an empty band: {denied}\n{err}");

    let mut learn = vec!["learn", "--workspace", &ws_s, "--write", &target];
    learn.extend(input);
    let (code, out, err) = band_in(t.path(), &learn);
    assert_eq!(code, 0, "{target}: band learn failed\n{out}\n{err}");

    let (code, learned, err) = band_in(t.path(), &before);
    assert_eq!(
        code, 0,
        "{target} with the drafted band:\n{out}\n{learned}\n{err}"
    );
    let (code, shipped, err) = runner(
        &[
            &["run", "--json", "--workspace", &shipped_ws_s, &target][..],
            input,
        ]
        .concat(),
        src,
    );
    assert_eq!(code, 0, "{target} shipped: {err}");
    let output =
        |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null)["output"].clone();
    assert_eq!(output(&learned), output(&shipped), "{target}");
    assert_no_wider(src, t.path(), skill, script);
    // The skill was re-locked: a locked run passes.
    let mut locked = vec![
        "run",
        "--json",
        "--require-lock",
        "--workspace",
        &locked_ws_s,
        &target,
    ];
    locked.extend(input);
    assert_eq!(band_in(t.path(), &locked).0, 0, "{target} --require-lock");
    Learned { dir: t, band_file }
}

#[test]
fn privileged_learn_text_count_from_an_empty_band() {
    band_test::privileged!(sandbox_missing());
    learn_and_rerun("text", "count", &["--text=one two three"], None);
}

#[test]
fn privileged_learn_text_summary_from_an_empty_band() {
    band_test::privileged!(sandbox_missing());
    learn_and_rerun(
        "text",
        "summary",
        &[
            "--text=Cats sleep. Dogs bark loudly. Birds sing.",
            "--sentences=2",
        ],
        None,
    );
}

#[test]
fn privileged_learn_csv_stats_describe_from_an_empty_band() {
    band_test::privileged!(sandbox_missing());
    let ws = tempfile::tempdir().expect("tmp");
    fs_err::create_dir_all(ws.path().join("data")).expect("mkdir");
    fs_err::copy(
        repo().join("tests/fixtures/csv/cities.csv"),
        ws.path().join("data/cities.csv"),
    )
    .expect("copy");
    fs_err::write(ws.path().join("data/untouched.csv"), "a\n1\n").expect("write");
    learn_and_rerun(
        "csv-stats",
        "describe",
        &["--path=data/cities.csv"],
        Some(ws.path()),
    );
}

#[test]
fn privileged_learn_csv_stats_report_from_an_empty_band() {
    band_test::privileged!(sandbox_missing());
    // Reads data/, writes out/ (its band insists on the report).
    let ws = tempfile::tempdir().expect("tmp");
    fs_err::create_dir_all(ws.path().join("data")).expect("mkdir");
    fs_err::copy(
        repo().join("tests/fixtures/csv/cities.csv"),
        ws.path().join("data/cities.csv"),
    )
    .expect("copy");
    learn_and_rerun(
        "csv-stats",
        "report",
        &["--path=data/cities.csv"],
        Some(ws.path()),
    );
}

#[test]
fn privileged_learn_json_transform_apply_from_an_empty_band() {
    band_test::privileged!(sandbox_missing());
    learn_and_rerun(
        "json-transform",
        "apply",
        &[
            "--filter=map(.price) | add",
            r#"--data=[{"price": 2}, {"price": 3}]"#,
        ],
        None,
    );
}

#[test]
fn privileged_learn_http_fetch_extract_from_an_empty_band() {
    band_test::privileged!(sandbox_missing());
    let html = "<html><head><title>T</title></head><body><p>Hello</p></body></html>";
    let input = json!({ "html": html }).to_string();
    learn_and_rerun("http-fetch", "extract", &["--input", &input], None);
}

#[test]
fn privileged_learn_drafts_exactly_what_a_script_did() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    // One file read, one written, two commands (jq, python3), one name looked up; a second
    // workspace file never touched.
    unbanded_demo(
        &t.path().join("skills"),
        "#!/bin/sh\nset -e\njq -r .name \"$INPUT_PATH\" > /dev/null\npython3 /skill/lib/resolve.py\nread line < data/in.txt\nmkdir -p out\necho \"$line\" > out/result.txt\necho '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n",
        &[(
            "lib/resolve.py",
            "import socket\ntry:\n    socket.getaddrinfo('probe.learn.test', 80)\nexcept OSError:\n    pass\n",
        )],
    );
    let ws = t.path().join("ws");
    fs_err::create_dir_all(ws.join("data")).expect("mkdir");
    fs_err::write(ws.join("data/in.txt"), "hello\n").expect("write");
    fs_err::write(ws.join("data/other.txt"), "never read\n").expect("write");
    // The DNS stub asks only a resolver of ours: a dead loopback port.
    let cfg = t.path().join("server.toml");
    fs_err::write(&cfg, "dns_upstream = [\"127.0.0.1:9\"]\n").expect("write");

    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", &cfg).run(
        &[
            "learn",
            "--json",
            "--skills",
            "skills",
            "--workspace",
            "ws",
            "demo/hello",
            "--name=x",
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    let rules = |k: &str| -> Vec<String> {
        doc["draft"][k]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["rule"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        rules("cli"),
        [
            "jq -r .name /band/io/input.json",
            "python3 /skill/lib/resolve.py"
        ],
        "{doc}"
    );
    assert_eq!(rules("read"), ["data/in.txt"], "{doc}");
    assert_eq!(rules("write"), ["out/result.txt"], "{doc}");
    assert_eq!(rules("net"), ["probe.learn.test"], "{doc}");
    assert!(rules("secrets").is_empty(), "{doc}");
    // The workspace was a copy: nothing was written back.
    assert!(!ws.join("out").exists());
    // Evidence, one line per rule.
    assert_eq!(doc["draft"]["read"][0]["evidence"], "read data/in.txt");
}

#[test]
fn privileged_learn_merges_runs_and_an_adhoc_command_is_learned_too() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let band_md = t.path().join("BAND.md");
    fs_err::write(
        &band_md,
        "---\nband: adhoc\ndescription: An ad-hoc band.\nversion: 1\n---\n",
    )
    .expect("write");
    let cfg = dead_dns();
    let learn = |words: &[&str]| {
        let mut args = vec!["learn", "--json", "--merge", "--band", "BAND.md", "--"];
        args.extend(words);
        let (code, out, err) = bin()
            .env("BAND_SERVER_CONFIG", cfg.path())
            .run(&args, t.path());
        assert_eq!(code, 0, "{out}\n{err}");
        serde_json::from_str::<Value>(&out).expect("json")
    };
    // Each run adds its call; from the second, the value that differed is a pattern.
    let cli = |doc: &Value| -> Vec<String> {
        doc["draft"]["cli"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| r["rule"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(cli(&learn(&["jq", "-n", "1"])), ["jq -n 1"]);
    let doc = learn(&["jq", "-n", "2"]);
    assert_eq!(cli(&doc), ["jq -n [0-9]*"]);
    assert!(
        doc["draft"]["cli"][0]["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("differed across 2 runs: 1, 2")),
        "{doc}"
    );
    assert_eq!(cli(&learn(&["jq", "-n", "3"])), ["jq -n [0-9]*"]);
}

#[test]
fn privileged_learn_records_a_path_outside_the_workspace_and_nothing_untouched() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    // A host file outside the workspace (hidden in the sandbox until a rule binds it), a
    // neighbour never touched, and a path that exists nowhere. Under /srv: band learn never
    // drafts a rule under /etc (issue 36).
    let id = std::process::id();
    fs_err::create_dir_all("/srv").expect("mkdir /srv");
    let probe = format!("/srv/band-learn-probe-{id}.conf");
    let neighbour = format!("/srv/band-learn-untouched-{id}.conf");
    fs_err::write(&probe, "from the host\n").expect("write probe");
    fs_err::write(&neighbour, "never read\n").expect("write neighbour");
    struct Rm(Vec<String>);
    impl Drop for Rm {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = fs_err::remove_file(p);
            }
        }
    }
    let _rm = Rm(vec![probe.clone(), neighbour.clone()]);
    unbanded_demo(
        &t.path().join("skills"),
        &format!(
            "#!/bin/sh\nline=$(cat {probe} 2>/dev/null || echo missing)\ncat /opt/band-learn-nowhere-{id}/y 2>/dev/null || true\nprintf '{{\"greeting\":\"%s\"}}' \"$line\" > \"$OUTPUT_PATH\"\n"
        ),
        &[],
    );
    let ws = t.path().join("ws");
    fs_err::create_dir_all(&ws).expect("mkdir");

    let run = || {
        let (code, out, err) = bin().run(
            &[
                "run",
                "--json",
                "--skills",
                "skills",
                "--workspace",
                "ws",
                "demo/hello",
                "--name=x",
            ],
            t.path(),
        );
        assert_eq!(code, 0, "{out}\n{err}");
        serde_json::from_str::<Value>(&out).expect("json")["output"]["greeting"].clone()
    };
    // Before: the sandbox hides the host file.
    assert_eq!(run(), "missing");

    let cfg = dead_dns();
    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", cfg.path()).run(
        &[
            "learn",
            "--json",
            "--write",
            "--skills",
            "skills",
            "--workspace",
            "ws",
            "demo/hello",
            "--name=x",
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    let rules = |k: &str| -> Vec<String> {
        doc["draft"][k]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["rule"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Exactly the file it opened: not its neighbour, not its folder, not the loader or libc.
    assert_eq!(rules("read"), [probe.as_str()], "{doc}");
    assert!(rules("write").is_empty(), "{doc}");
    let evidence = doc["draft"]["read"][0]["evidence"].as_str().unwrap_or("");
    assert!(evidence.contains("not in the sandbox"), "{evidence}");
    // The path that exists nowhere is a note, not a rule.
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains(&format!("/opt/band-learn-nowhere-{id}/y")),
        "{notes}"
    );
    // The kernel saw the open: the raw record says so.
    let outside = doc["observed"]["outside"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        outside.iter().any(|p| p["path"] == probe.as_str()
            && p["access"] == "read"
            && p["in_sandbox"] == false),
        "{outside:?}"
    );
    assert!(
        !outside.iter().any(|p| p["path"] == neighbour.as_str()),
        "{outside:?}"
    );
    // After --write: the learned band binds it, and the script reads the host's file.
    assert_eq!(run(), "from the host");
}

#[test]
fn privileged_learn_finds_a_command_named_through_a_variable() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    // No file of the skill names `uname`: the script builds the name. It also tries a program
    // this host does not have.
    unbanded_demo(
        &t.path().join("skills"),
        "#!/bin/sh\nTOOL=$(printf 'un%se' am)\nos=$($TOOL -s)\nband-learn-no-such-tool 2>/dev/null || true\nprintf '{\"greeting\":\"%s\"}' \"$os\" > \"$OUTPUT_PATH\"\n",
        &[],
    );
    let args = |extra: &[&'static str]| {
        let mut a = vec!["--skills", "skills", "demo/hello", "--name=x"];
        a.extend(extra);
        a
    };
    let cfg = dead_dns();
    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", cfg.path()).run(
        &[&["learn", "--json", "--write"][..], &args(&[])].concat(),
        t.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    let cli: Vec<&str> = doc["draft"]["cli"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["rule"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(cli, ["uname -s"], "{doc}");
    let notes = doc["notes"].to_string();
    assert!(notes.contains("observed again with it on PATH"), "{notes}");
    assert!(
        notes.contains("`band-learn-no-such-tool`, which this host does not have"),
        "{notes}"
    );
    let (code, out, err) = bin().run(&[&["run", "--json"][..], &args(&[])].concat(), t.path());
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["output"]["greeting"], "Linux", "{doc}");
}

/// `--write` re-locks the skill as `band lock` does: not when lint finds errors in it. The
/// learned band is written; the lock is not, and the error names the lint error.
#[test]
fn privileged_learn_write_does_not_lock_a_skill_with_lint_errors() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let root = unbanded_demo(
        &t.path().join("skills"),
        "#!/bin/sh\nos=$(uname -s)\nprintf '{\"greeting\":\"%s\"}' \"$os\" > \"$OUTPUT_PATH\"\n",
        &[],
    );
    // A name that is not the folder's: lint error S002, which does not stop a run.
    let skill_md = root.join("SKILL.md");
    let text = fs_err::read_to_string(&skill_md).expect("read");
    fs_err::write(&skill_md, text.replacen("name: demo", "name: other", 1)).expect("write");
    let cfg = dead_dns();
    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", cfg.path()).run(
        &[
            "learn",
            "--write",
            "--skills",
            "skills",
            "demo/hello",
            "--name=x",
        ],
        t.path(),
    );
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(err.contains("band.lock was not written"), "{err}");
    assert!(err.contains("does not match the folder `demo`"), "{err}");
    let band = fs_err::read_to_string(root.join("BAND.md")).expect("band");
    assert!(
        band.contains("uname -s"),
        "the learned band was not written:\n{band}"
    );
    assert!(!root.join("band.lock").exists(), "a lock was written");
}

/// A skill `demo/hello` in `dir/skills` whose script resolves `api.learn.test` and fetches
/// `http://api.learn.test:8080/learn` (Python's socket module), with an empty allow list.
/// A band that governs two scripts: `band learn --write` on one keeps the rules the other
/// needs (here, its own entry and a command only it runs), so the other still runs after it;
/// `--trace` on the first does not call the other's rules candidates to remove.
#[test]
fn privileged_learn_on_one_script_keeps_what_the_bands_other_scripts_need() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    SkillBuilder::new("pair")
        .band(
            "description: Two scripts.\nversion: 1\nallow:\n  cli:\n    - \"uname -s\"\n    - \"id -u\"\n",
        )
        .script("a.sh", "#!/bin/sh\nuname -s\n")
        .script("b.sh", "#!/bin/sh\nid -u\n")
        .input_schema("a", SkillBuilder::NO_INPUT)
        .input_schema("b", SkillBuilder::NO_INPUT)
        .write(&skills);
    let cfg = dead_dns();
    let band = |args: &[&str]| band_in(&cfg, t.path(), args);

    let (code, _, err) = band(&["run", "--trace", "--skills", "skills", "pair/a"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "trace: allow.cli rules no call used (the band also governs `b`, which may need them): \"id -u\""
        ),
        "{err}"
    );

    let (code, out, err) = band(&["learn", "--write", "--skills", "skills", "pair/a"]);
    assert_eq!(code, 0, "{out}\n{err}");
    // A line of its own, kept (` `, not `-`), saying why.
    assert!(
        out.lines().any(|l| l.starts_with("  \"id -u\"")
            && l.ends_with("# kept: the band also governs `b`, which this run cannot speak for")),
        "{out}"
    );
    assert!(!out.contains("- \"id -u\""), "{out}");
    let written = fs_err::read_to_string(skills.join("pair/BAND.md")).expect("band");
    assert!(written.contains("id -u"), "{written}");
    let (code, out, err) = band(&["run", "--skills", "skills", "pair/b"]);
    assert_eq!(code, 0, "pair/b after learning pair/a:\n{out}\n{err}");
    // `id -u` ran: the run's leased uid, never root's.
    assert!(out.trim().parse::<u32>().is_ok_and(|uid| uid != 0), "{out}");
}

/// A script that only tests whether a file exists (`[ -e LICENSE ]`): the observer sees no
/// open, but the script names the file, so learn keeps its read rule, and the run after
/// `--write` still finds it.
#[test]
fn privileged_learn_keeps_a_read_rule_for_a_file_the_script_only_tests() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    fs_err::write(ws.join("LICENSE"), "MIT\n").expect("write");
    SkillBuilder::new("exists")
        .band("description: Checks for a license.\nversion: 1\nallow:\n  read: [\"LICENSE\"]\n")
        .script(
            "check.sh",
            "#!/bin/sh\nif [ -e LICENSE ]; then echo present; else echo missing; fi\n",
        )
        .input_schema("check", SkillBuilder::NO_INPUT)
        .write(&skills);
    let cfg = dead_dns();
    let w = ws.to_str().expect("utf-8");
    let band = |args: &[&str]| band_in(&cfg, t.path(), args);
    let (code, out, err) = band(&[
        "learn",
        "--write",
        "--skills",
        "skills",
        "--workspace",
        w,
        "exists/check",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.lines().any(|l| l.starts_with("  \"LICENSE\"")
            && l.ends_with("# kept: scripts/check.sh names it, and a test of a file's existence (`[ -e ]`, `stat`) is not observed")),
        "{out}"
    );
    let (code, out, err) = band(&[
        "run",
        "--skills",
        "skills",
        "--workspace",
        w,
        "exists/check",
    ]);
    assert_eq!((code, out.trim()), (0, "present"), "{err}");
}

/// An input contract of free arguments only (`-- ARGS`), as `band wrap` drafts for a script
/// that reads its own command line.
const ARGS_ONLY: &str = r#"{"type":"object","properties":{"args":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}"#;

/// A script with no execute bit (a `#!` line, mode 644, as many public skills ship them) is
/// started by band-server with its interpreter, which no observed call shows: before, learn
/// drafted the removal of `python3 /skill/scripts/count.py *` and every run after `--write` was
/// `setup_failed`. Now the draft keeps it, and lint calls a band without it an error (S013).
#[test]
fn privileged_learn_keeps_the_rule_that_starts_a_script_with_no_execute_bit() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    fs_err::write(ws.join("in.txt"), "a\nb\n").expect("write");
    fs_err::write(ws.join("other.txt"), "a\nb\nc\n").expect("write");
    SkillBuilder::new("one")
        .band(
            "description: Counts lines.\nversion: 1\nallow:\n  \
             cli: [\"python3 /skill/scripts/count.py *\"]\n  read: [\"*.txt\"]\n",
        )
        .file(
            "scripts/count.py",
            0o644,
            "#!/usr/bin/env python3\nimport sys\nprint(sum(1 for _ in open(sys.argv[1])))\n",
        )
        .input_schema("count", ARGS_ONLY)
        .write(&skills);
    let cfg = dead_dns();
    let w = ws.to_str().expect("utf-8");
    let band = |args: &[&str]| band_in(&cfg, t.path(), args);
    let (code, out, err) = band(&[
        "learn",
        "--write",
        "--skills",
        "skills",
        "--workspace",
        w,
        "one/count",
        "--",
        "in.txt",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("  \"python3 /skill/scripts/count.py *\"")
                && l.contains(
                    "# kept: band-server starts the script with python3 (by its #! line)"
                )),
        "{out}"
    );
    let (code, out, err) = band(&["lint", "skills/one"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, err) = band(&[
        "run",
        "--skills",
        "skills",
        "--workspace",
        w,
        "one/count",
        "--",
        "in.txt",
    ]);
    assert_eq!((code, out.trim()), (0, "2"), "{err}");
    // Without the rule, lint says the run cannot start, and why.
    let band_md = skills.join("one/BAND.md");
    let text = fs_err::read_to_string(&band_md).expect("read");
    fs_err::write(
        &band_md,
        text.replace("\"python3 /skill/scripts/count.py *\"", "\"jq *\""),
    )
    .expect("write");
    let (code, out, err) = band(&["lint", "skills/one"]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("S013")
            && format!("{out}{err}").contains("is started with python3"),
        "{out}\n{err}"
    );
}

/// An executable script (`#!/usr/bin/env python3`, mode 755) is started by the kernel through its
/// `#!` interpreter, a call the CLI gate sees: before, learn narrowed the rule `band wrap` writes
/// (`python3 /skill/scripts/analyze_plan.py *`) to the one run's arguments
/// (`python3 /skill/scripts/analyze_plan.py [A-Za-z0-9]*`), and the next run with another argument
/// list (a flag) was refused. Now the draft keeps it: the agent's arguments differ each run. A
/// `#!` line naming its interpreter by path (`#!/usr/bin/python3 -u`) is exec'd with no call the
/// gate records: before, learn drafted the removal of its rule, and the next run was
/// `setup_failed`; now the rule is kept. A `#!/bin/sh` script needs no rule (`sh` is one of the
/// essentials every band gets), and still runs.
#[test]
fn privileged_learn_keeps_the_rule_that_starts_an_executable_script() {
    band_test::privileged!(sandbox_missing());
    const PY: &str = "import json, sys\nn = len(json.load(open(sys.argv[1])))\n\
                      print(json.dumps({\"steps\": n}) if sys.argv[2:] == [\"--format\", \"json\"] else n)\n";
    const SH: &str = "n=$(wc -l < \"$1\")\nif [ \"$2 $3\" = \"--format json\" ]; \
                      then printf '{\"steps\": %s}\\n' \"$n\"; else echo \"$n\"; fi\n";
    let cases: [(&str, String, &str, Option<&str>); 3] = [
        (
            "analyze_plan.py",
            format!("#!/usr/bin/env python3\n{PY}"),
            "python3 /skill/scripts/analyze_plan.py *",
            Some("python3"),
        ),
        (
            "analyze_plan.py",
            format!("#!/usr/bin/python3 -u\n{PY}"),
            "python3 -u /skill/scripts/analyze_plan.py *",
            Some("python3"),
        ),
        (
            "analyze_plan.sh",
            format!("#!/bin/sh\n{SH}"),
            "sh /skill/scripts/analyze_plan.sh *",
            None,
        ),
    ];
    for (file, text, rule, interpreter) in cases {
        let t = tempfile::tempdir().expect("tmp");
        let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
        fs_err::create_dir_all(&ws).expect("mkdir");
        fs_err::write(ws.join("plan.json"), "[1,\n 2]\n").expect("write");
        SkillBuilder::new("plans")
            .band(&format!(
                "description: Analyzes plans.\nversion: 1\nallow:\n  \
                 cli: [\"{rule}\"]\n  read: [\"*.json\"]\n"
            ))
            .file(&format!("scripts/{file}"), 0o755, &text)
            .input_schema("analyze_plan", ARGS_ONLY)
            .write(&skills);
        let cfg = dead_dns();
        let w = ws.to_str().expect("utf-8");
        let band = |args: &[&str]| band_in(&cfg, t.path(), args);
        let (code, out, err) = band(&[
            "learn",
            "--write",
            "--skills",
            "skills",
            "--workspace",
            w,
            "plans/analyze_plan",
            "--",
            "plan.json",
        ]);
        assert_eq!(code, 0, "{rule}\n{out}\n{err}");
        assert!(!out.contains("[A-Za-z0-9]*"), "{rule}\n{out}");
        let band_md = fs_err::read_to_string(skills.join("plans/BAND.md")).expect("read");
        match interpreter {
            Some(i) => {
                assert!(
                    out.lines().any(|l| l.starts_with(&format!("  \"{rule}\""))
                        && l.contains(&format!(
                            "# kept: the kernel starts the script with {i} (by its #! line)"
                        ))),
                    "{rule}\n{out}"
                );
                assert!(band_md.contains(&format!("\"{rule}\"")), "{band_md}");
            }
            None => assert!(!band_md.contains(rule), "{band_md}"),
        }
        let (code, out, err) = band(&["lint", "skills/plans"]);
        assert_eq!(code, 0, "{rule}\n{out}\n{err}");
        let (code, out, err) = band(&[
            "run",
            "--skills",
            "skills",
            "--workspace",
            w,
            "plans/analyze_plan",
            "--",
            "plan.json",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{rule}\n{out}\n{err}");
        assert!(out.contains("\"steps\": 2"), "{rule}\n{out}\n{err}");
    }
}

/// A skill whose BAND.md leads through `path:` to a band outside it (other skills may share
/// it): `band learn --write` refuses, and writes nothing there.
#[test]
fn privileged_learn_write_refuses_a_band_outside_the_skill() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    SkillBuilder::new("ev")
        .band("path: ../../shared/common.band.md\n")
        .script("s.sh", "#!/bin/sh\nuname -s\n")
        .input_schema("s", SkillBuilder::NO_INPUT)
        .write(&skills);
    let shared = t.path().join("shared/common.band.md");
    fs_err::create_dir_all(shared.parent().expect("parent")).expect("mkdir");
    let text = "---\nband: common\ndescription: Shared.\nversion: 1\nallow:\n  cli: [\"uname *\", \"id -u\"]\n---\n";
    fs_err::write(&shared, text).expect("write");
    let cfg = dead_dns();
    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", cfg.path()).run(
        &["learn", "--write", "--skills", "skills", "ev/s"],
        t.path(),
    );
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("outside the skill (reached through `path:`)"),
        "{err}"
    );
    assert_eq!(fs_err::read_to_string(&shared).expect("read"), text);
}

fn net_skill(dir: &Path) {
    unbanded_demo(
        &dir.join("skills"),
        "#!/bin/sh\npython3 /skill/lib/get.py > \"$OUTPUT_PATH\"\n",
        &[(
            "lib/get.py",
            "import json, socket\ntry:\n    s = socket.create_connection(('api.learn.test', 8080), timeout=5)\n    s.sendall(b'GET /learn HTTP/1.0\\r\\nHost: api.learn.test\\r\\n\\r\\n')\n    body = s.makefile('rb').read().decode().split('\\r\\n\\r\\n', 1)[-1]\n    print(json.dumps({'greeting': body.split()[0]}))\nexcept OSError as e:\n    print(json.dumps({'greeting': 'unreachable'}))\n",
        )],
    );
}

fn learn_json(dir: &Path, config: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "learn",
        "--json",
        "--skills",
        "skills",
        "demo/hello",
        "--name=x",
    ];
    args.extend(extra);
    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", config).run(&args, dir);
    assert_eq!(code, 0, "{out}\n{err}");
    serde_json::from_str(&out).expect("json")
}

fn draft_rules(doc: &Value, key: &str) -> Vec<String> {
    doc["draft"][key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["rule"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn privileged_learn_with_net_drafts_the_host_and_port_a_script_contacted() {
    band_test::privileged!(sandbox_missing());
    let lab = band_test::netlab::Lab::new(&["api.learn.test"]);
    let t = tempfile::tempdir().expect("tmp");
    net_skill(t.path());
    let doc = learn_json(t.path(), &lab.config, &["--net", "--write"]);
    assert_eq!(draft_rules(&doc, "net"), ["api.learn.test:8080"], "{doc}");
    assert_eq!(
        draft_rules(&doc, "cli"),
        ["python3 /skill/lib/get.py"],
        "{doc}"
    );
    assert!(draft_rules(&doc, "read").is_empty(), "{doc}");
    assert!(draft_rules(&doc, "write").is_empty(), "{doc}");
    let evidence = doc["draft"]["net"][0]["evidence"].as_str().unwrap_or("");
    assert!(evidence.contains("api.learn.test"), "{evidence}");
    assert!(
        lab.log("http.log").contains("/learn"),
        "{}",
        lab.log("http.log")
    );
    // The learned band runs it: the name resolves and the host answers.
    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", &lab.config).run(
        &[
            "run",
            "--json",
            "--skills",
            "skills",
            "demo/hello",
            "--name=x",
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let run: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(run["output"]["greeting"], "hello", "{run}");
}

#[test]
fn privileged_learn_without_net_records_the_name_and_says_the_contact_was_not_tried() {
    band_test::privileged!(sandbox_missing());
    let lab = band_test::netlab::Lab::new(&["api.learn.test"]);
    let t = tempfile::tempdir().expect("tmp");
    net_skill(t.path());
    let doc = learn_json(t.path(), &lab.config, &[]);
    // The name, by itself: no port, since nothing was contacted.
    assert_eq!(draft_rules(&doc, "net"), ["api.learn.test"], "{doc}");
    assert_eq!(doc["observations"]["lookups"][0], "api.learn.test", "{doc}");
    let notes = doc["notes"].to_string();
    assert!(notes.contains("not tried"), "{notes}");
    assert!(notes.contains("--net"), "{notes}");
    // Nothing reached the lab's web server.
    assert_eq!(lab.log("http.log"), "");
}

/// An HTTPS server in `lab`'s namespace on `host:443`, with the certificate `dir/srv.crt` (key
/// `dir/srv.key`), answering every GET with [`LAB_PAGE`] and logging `Host path` to
/// `dir/https.log`. Killed on drop.
struct HttpsServer(std::process::Child);

const LAB_PAGE: &str = "<html><head><title>Band learn</title></head><body><h1>Learned</h1>\
<p>Served by the lab over HTTPS.</p></body></html>";

impl HttpsServer {
    fn start(lab: &band_test::netlab::Lab, dir: &Path) -> HttpsServer {
        let script = dir.join("https.py");
        fs_err::write(
            &script,
            format!(
                r#"import http.server, ssl, sys
d, addr = sys.argv[1], sys.argv[2]
page = {page:?}.encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(d + "/https.log", "a") as f:
            f.write(self.headers.get("Host", "") + " " + self.path + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((addr, 443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(d + "/srv.crt", d + "/srv.key")
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(d + "/https.ready", "w").close()
srv.serve_forever()
"#,
                page = LAB_PAGE
            ),
        )
        .expect("write server");
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", lab.netns(), "/usr/bin/python3"])
            .arg(&script)
            .arg(dir)
            .arg(lab.host())
            .spawn()
            .expect("https server");
        let mut server = HttpsServer(child);
        band_test::wait_until("the lab's HTTPS server starts", || {
            let exited = server.0.try_wait().ok().flatten();
            assert!(
                exited.is_none(),
                "the lab's HTTPS server exited: {exited:?}"
            );
            dir.join("https.ready").exists()
        });
        server
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// http-fetch's `fetch` (curl over HTTPS to an `allow.net` host), learned with `--net` from its
/// emptied band. The host is `docs.rs`, one of the shipped band's names and one the input
/// schema's url pattern admits, so the shipped skill is used as it is and the learned band is
/// compared with the shipped one exactly (net included). The name never reaches the real
/// docs.rs: every band-server here asks the lab's resolver (`BAND_SERVER_CONFIG`), which
/// answers it with the lab's host in a network namespace the test made, where an HTTPS server
/// with a certificate from a CA the test made answers. Every `band` command runs in a private
/// mount namespace where `/etc/ssl/certs` (the CA store bubblewrap binds into the sandbox,
/// `ca-certificates.crt` being curl's bundle) holds that CA only: the host's trust store is not
/// touched, and a run outside that namespace would not trust the lab.
#[test]
fn privileged_learn_http_fetch_fetch_from_an_empty_band() {
    band_test::privileged!(sandbox_missing());
    use std::os::unix::fs::PermissionsExt;
    let lab = band_test::netlab::Lab::new(&["docs.rs"]);
    let pki = tempfile::tempdir().expect("tmp");
    make_ca_and_cert(pki.path(), "docs.rs");
    let _server = HttpsServer::start(&lab, pki.path());
    // The sandbox's uid reads the bundle: the bound folder and the file are world-readable.
    let certs = tempfile::tempdir().expect("tmp");
    fs_err::copy(
        pki.path().join("ca.crt"),
        certs.path().join("ca-certificates.crt"),
    )
    .expect("copy ca");
    fs_err::set_permissions(certs.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    fs_err::set_permissions(
        certs.path().join("ca-certificates.crt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");

    let learn_out = std::cell::RefCell::new(String::new());
    let runner = |args: &[&str], cwd: &Path| {
        let mut full = args.to_vec();
        let learn = full.first() == Some(&"learn");
        if learn {
            full.splice(1..1, ["--json", "--net"]);
        }
        let mut cmd = std::process::Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
            .arg("mount --bind \"$0\" /etc/ssl/certs && exec \"$@\"")
            .arg(certs.path())
            .arg(bin().exe())
            .args(&full)
            .current_dir(cwd);
        bin().env("BAND_SERVER_CONFIG", &lab.config).apply(&mut cmd);
        let r = band_test::Output::of(&mut cmd).parts();
        if learn {
            *learn_out.borrow_mut() = r.1.clone();
        }
        r
    };
    let url = "https://docs.rs/band-learn";
    let input = json!({ "url": url }).to_string();
    // Fails emptied; learns; the draft runs and gives the shipped band's output; no wider than
    // the shipped band (net: `GET https://docs.rs/**` is covered by the shipped `docs.rs:443`); re-locked.
    let learned = learn_and_rerun_from(
        repo(),
        &runner,
        "http-fetch",
        "fetch",
        &["--input", &input],
        None,
    );
    let doc: Value = serde_json::from_str(&learn_out.borrow()).expect("learn --json");
    // The one request the egress proxy saw, as an HTTP rule: its URL was the input's, so any
    // path of its host (`/**`), GET only; the evidence names the request.
    assert_eq!(
        draft_rules(&doc, "net"),
        ["GET https://docs.rs/**"],
        "{doc}"
    );
    let evidence = doc["draft"]["net"][0]["evidence"].as_str().unwrap_or("");
    assert!(evidence.contains("GET /band-learn"), "{evidence}");
    // The curl call as the script made it, its URL (the input's) a pattern: the shipped rule.
    assert!(url.starts_with("https://"), "{url}");
    let curl =
        "curl -q --silent --show-error --fail --location --proto =https --proto-redir =https \
         --max-redirs 3 --max-time 20 --max-filesize 2097152 --output /tmp/page.html -- https://*"
            .to_string();
    assert!(
        draft_rules(&doc, "cli").contains(&curl),
        "{curl}\n{:?}",
        draft_rules(&doc, "cli")
    );
    let band = fs_err::read_to_string(&learned.band_file).expect("read band");
    assert!(band.contains("GET https://docs.rs/**"), "{band}");
    for other in ["en.wikipedia.org", "docs.python.org", "www.rfc-editor.org"] {
        assert!(!band.contains(other), "{other} learned:\n{band}");
    }
    // The learned band fetches the lab's page and returns its text.
    let skills = learned.dir.path().join("skills").display().to_string();
    let (code, out, err) = runner(
        &[
            "run",
            "--json",
            "--skills",
            &skills,
            "http-fetch/fetch",
            "--input",
            &input,
        ],
        learned.dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Served by the lab over HTTPS."), "{out}");
    // Every fetch went to the lab (learn, the learned band's runs, the shipped band's run).
    let log = fs_err::read_to_string(pki.path().join("https.log")).unwrap_or_default();
    assert!(log.lines().count() >= 3, "{log}");
    assert!(log.lines().all(|l| l == "docs.rs /band-learn"), "{log}");
    assert!(
        lab.log("dns.log").contains("docs.rs"),
        "{}",
        lab.log("dns.log")
    );
}

/// `band <args>` in `cwd` in a private mount namespace where `/usr/local/bin` is `standins`
/// (band and the band-server it starts see the stand-ins; the host's programs are untouched),
/// with `GITHUB_TOKEN` set to a dummy.
fn run_with_standins(standins: &Path, args: &[&str], cwd: &Path) -> (i32, String, String) {
    let mut cmd = std::process::Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        "mount --bind \"$0\" /usr/local/bin && exec \"$@\"",
    ])
    .arg(standins)
    .arg(bin().exe())
    .args(args)
    .current_dir(cwd);
    let cfg = dead_dns();
    bin()
        .env("GITHUB_TOKEN", "not-a-token")
        .env("BAND_SERVER_CONFIG", cfg.path())
        .apply(&mut cmd);
    band_test::Output::of(&mut cmd).parts()
}

#[test]
fn privileged_learn_github_scripts_from_an_empty_band_with_a_stand_in_gh() {
    band_test::privileged!(sandbox_missing());
    use std::os::unix::fs::PermissionsExt;
    let inputs = crate::skills::github_inputs();
    let scripts = crate::skills::scripts_of("github");
    let named: std::collections::BTreeSet<String> =
        inputs.iter().map(|(s, _)| s.to_string()).collect();
    assert_eq!(named, scripts, "one input per github script");
    // Every script whose test input has no newline: the read-only ones (under BAND.md) and the
    // write and delete ones that point to bands/ (`--write` edits the band pointed to). A newline
    // in an argument cannot be spelled by a cli pattern (one line, no control characters): learn
    // notes that call rather than drafting it. Quotes and `$(…)` are drafted exactly.
    let plain = |v: &Value| !v.to_string().contains("\\n");
    let mut learned = 0;
    // `api` included: its learned rule is exact and escapes `?` (`…contributors\?per_page=1`),
    // which CliPattern::covers reads as the literal `?` the shipped glob matches.
    let mut saw_api = false;
    for (script, input) in inputs.into_iter().filter(|(_, v)| plain(v)) {
        saw_api |= script == "api";
        learned += 1;
        // A stand-in `gh` that prints the script's fixture (what the real gh would answer).
        let standins = tempfile::tempdir().expect("tmp");
        let fixture =
            fs_err::read_to_string(crate::skills::fixture_of("github", script)).expect("fixture");
        assert!(!fixture.contains("\nBAND_FIXTURE_END\n"));
        let gh = standins.path().join("gh");
        fs_err::write(
            &gh,
            format!("#!/bin/sh\ncat <<'BAND_FIXTURE_END'\n{fixture}\nBAND_FIXTURE_END\n"),
        )
        .expect("write gh");
        fs_err::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let input = input.to_string();
        let runner = |args: &[&str], cwd: &Path| {
            let mut full = args.to_vec();
            if full.first() == Some(&"learn") {
                full.insert(1, "--secret");
                full.insert(2, "GITHUB_TOKEN");
            }
            run_with_standins(standins.path(), &full, cwd)
        };
        learn_and_rerun_with(&runner, "github", script, &["--input", &input], None);
    }
    assert!(
        learned >= 30,
        "only {learned} github scripts have plain inputs"
    );
    assert!(saw_api, "the api script was learned and compared too");
}

/// `band <args>` in `cwd`, in a private mount namespace whose `/usr/local/bin` holds only
/// `standins` (name → file text), with the test secrets, the DNS stub pointed at a dead port;
/// a `learn` passes `--secret` for each of `secrets`.
fn run_with_recorded_standins(
    standins: &std::collections::BTreeMap<String, String>,
    secrets: &[&str],
    args: &[&str],
    cwd: &Path,
) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tmp");
    for (name, text) in standins {
        crate::skill_set::write_exe(&dir.path().join(name), text);
    }
    let mut full: Vec<&str> = args.to_vec();
    if full.first() == Some(&"learn") {
        for s in secrets.iter().rev() {
            full.insert(1, s);
            full.insert(1, "--secret");
        }
    }
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(
            "mount -t tmpfs -o mode=0755 band-standins /usr/local/bin && cp -R \"$0\"/. /usr/local/bin/ && exec \"$@\"",
        )
        .arg(dir.path())
        .arg(bin().exe())
        .args(&full)
        .current_dir(cwd);
    let cfg = dead_dns();
    bin().env("BAND_SERVER_CONFIG", cfg.path()).apply(&mut cmd);
    for (k, v) in crate::skill_set::SECRETS {
        cmd.env(k, v);
    }
    band_test::Output::of(&mut cmd).parts()
}

/// Every recorded script of an API skill (copied at `src/skills/<skill>`), learned from its
/// emptied band with its recorded stand-ins (`curl` answering the recorded calls), run again
/// with the draft, the same output as the shipped band's run, and no wider a band: each
/// recorded command is drafted, and no host (the stand-in reaches none). For the first script,
/// the learned band without its `curl` rules cannot run curl (not on the sandbox's PATH).
/// Returns the scripts learned.
fn learn_recorded_skill(src: &Path, skill: &str, secrets: &[&str]) -> Vec<String> {
    let scripts = crate::skills::scripts_of(skill);
    for (i, script) in scripts.iter().enumerate() {
        let rec = crate::skill_set::recorded(skill, script);
        let standins: std::collections::BTreeMap<String, String> = rec
            .tapes
            .iter()
            .map(|(name, tape)| (name.clone(), crate::skill_set::standin(tape)))
            .collect();
        let ws = tempfile::tempdir().expect("tmp");
        for (rel, text) in &rec.workspace {
            let p = ws.path().join(rel);
            fs_err::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs_err::write(&p, text).expect("write");
        }
        let input = rec.input.to_string();
        let runner =
            |args: &[&str], cwd: &Path| run_with_recorded_standins(&standins, secrets, args, cwd);
        let learned = learn_and_rerun_from(
            src,
            &runner,
            skill,
            script,
            &["--input", &input],
            Some(ws.path()),
        );
        let text = fs_err::read_to_string(&learned.band_file).expect("learned band");
        let band = band::manifest::parse_band(&learned.band_file, &text);
        let policy = band.band.expect("learned band parses");
        for name in rec.tapes.keys() {
            assert!(
                policy
                    .allow
                    .cli
                    .iter()
                    .any(|r| r.starts_with(&format!("{name} "))),
                "{skill}/{script}: no {name} rule learned: {:?}",
                policy.allow.cli
            );
        }
        assert_eq!(policy.allow.net, Vec::<String>::new(), "{skill}/{script}");
        if i > 0 || !rec.tapes.contains_key("curl") {
            continue;
        }
        // Without its learned `curl` rules the band is refused the call, by the gate.
        let kept: Vec<String> = policy
            .allow
            .cli
            .iter()
            .filter(|r| !r.starts_with("curl "))
            .cloned()
            .collect();
        let text = band::learn::edit::set_list(&text, "allow", "cli", &kept).expect("edit");
        fs_err::write(&learned.band_file, text).expect("write band");
        let dir = learned.dir.path();
        let skills = dir.join("skills").display().to_string();
        let root = dir.join("skills").join(skill).display().to_string();
        assert_eq!(bin().run(&["lock", &root], dir).0, 0, "band lock");
        let ws_s = ws.path().display().to_string();
        let target = format!("{skill}/{script}");
        let (code, out, err) = runner(
            &[
                "run",
                "--json",
                "--skills",
                &skills,
                "--workspace",
                &ws_s,
                &target,
                "--input",
                &input,
            ],
            dir,
        );
        assert_ne!(code, 0, "{target} without curl: {out}\n{err}");
        let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        // No rule names curl: it is not even on the sandbox's PATH, and the shell's "not found"
        // is a denial with the rule that would allow it (`curl *`).
        assert_eq!(v["status"], "denied", "{out}\n{err}");
        assert!(
            v["stderr"]
                .as_str()
                .is_some_and(|e| e.contains("curl: not found")),
            "{out}\n{err}"
        );
        assert_eq!(
            v["denied"],
            json!([{"kind": "cli", "argv": ["curl"], "rule": null, "source": "not_found_message"}]),
            "{out}\n{err}"
        );
    }
    scripts.into_iter().collect()
}

#[test]
fn privileged_learn_slack_scripts_from_an_empty_band_with_a_recorded_curl() {
    band_test::privileged!(sandbox_missing());
    // The shipped channel allow-list is empty (every channel refused): learned from the copy a
    // user deploys, with the recorded channel listed.
    let (dir, _) = crate::skill_set::slack_copy();
    let learned = learn_recorded_skill(
        dir.path(),
        "slack",
        &["SLACK_BOT_TOKEN", "SLACK_USER_TOKEN"],
    );
    assert_eq!(learned.len(), 11, "{learned:?}");
}

#[test]
fn privileged_learn_elevenlabs_scripts_from_an_empty_band_with_a_recorded_curl() {
    band_test::privileged!(sandbox_missing());
    let learned = learn_recorded_skill(repo(), "elevenlabs", &["ELEVENLABS_API_KEY"]);
    assert_eq!(learned.len(), 6, "{learned:?}");
}

#[test]
fn privileged_learn_summarize_scripts_from_an_empty_band_with_a_recorded_curl() {
    band_test::privileged!(sandbox_missing());
    let learned = learn_recorded_skill(repo(), "summarize", &["ANTHROPIC_API_KEY"]);
    assert_eq!(learned.len(), 2, "{learned:?}");
}

/// A skill whose script counts the input's items and passes the count to `jq` as a flag's
/// value (`--argjson`, or `--arg` when the input says `raw`): the count is neither a value of
/// the input nor fixed.
fn counting_skill(root: &Path) {
    SkillBuilder::new("counter")
        .description("Counts its items.")
        .band("description: Counts its items.\nversion: 1\n")
        .script(
            "count.sh",
            "#!/bin/sh\nset -e\nn=$(jq -r '.items | length' \"$INPUT_PATH\")\n\
             flag=--argjson\nif [ \"$(jq -r '.raw // false' \"$INPUT_PATH\")\" = true ]; then flag=--arg; fi\n\
             jq -n $flag n \"$n\" '{count: $n}' > \"$OUTPUT_PATH\"\n",
        )
        .input_schema(
            "count",
            r#"{"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}}, "raw": {"type": "boolean"}}, "required": ["items"], "additionalProperties": false}"#,
        )
        .output_schema("count", r#"{"type": "object"}"#)
        .write(root);
}

/// Issue 38: a band learned from two runs with different data admits a third run with new data;
/// a call with another flag is still refused.
#[test]
fn privileged_learn_a_band_from_two_runs_with_different_data_admits_a_third() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    counting_skill(&t.path().join("skills"));
    let cfg = dead_dns();
    let band = |args: &[&str]| {
        let mut full = vec![args[0], "--skills", "skills"];
        full.extend(&args[1..]);
        bin()
            .env("BAND_SERVER_CONFIG", cfg.path())
            .run(&full, t.path())
    };
    let items = |n: usize| {
        let all: Vec<String> = (0..n).map(|i| format!("item-{i}")).collect();
        json!({ "items": all }).to_string()
    };
    // The first run starts the record afresh; the second is merged into it and written.
    let (code, out, err) = band(&["learn", "--json", "counter/count", "--input", &items(3)]);
    assert_eq!(code, 0, "{out}\n{err}");
    let one: Value = serde_json::from_str(&out).expect("json");
    assert!(
        draft_rules(&one, "cli").contains(&r#"jq -n --argjson n 3 "\{count: $n\}""#.to_string()),
        "{one}"
    );
    let (code, out, err) = band(&[
        "learn",
        "--json",
        "--merge",
        "--write",
        "counter/count",
        "--input",
        &items(4),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let two: Value = serde_json::from_str(&out).expect("json");
    let cli = draft_rules(&two, "cli");
    assert!(
        cli.contains(&r#"jq -n --argjson n [0-9]* "\{count: $n\}""#.to_string()),
        "{two}"
    );
    assert!(cli.iter().all(|r| !r.ends_with(" *")), "{cli:?}");
    // A third run, with five items, runs under the band written.
    let (code, out, err) = band(&["run", "--json", "counter/count", "--input", &items(5)]);
    assert_eq!(code, 0, "{out}\n{err}");
    let run: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(run["output"]["count"], 5, "{run}");
    // Another flag is not a value: refused.
    let raw = json!({ "items": ["a", "b"], "raw": true }).to_string();
    let (code, out, err) = band(&["run", "counter/count", "--input", &raw]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("denied: command `jq -n --arg n 2"),
        "{out}\n{err}"
    );
}

/// Issue 38: an empty folder of the workspace is in the observing sandbox as it is in a run's:
/// a script that writes into an empty `out/` without making it is observed doing so, and the
/// band drafted runs it.
#[test]
fn privileged_learn_keeps_the_workspaces_empty_folders_as_a_run_does() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    unbanded_demo(
        &t.path().join("skills"),
        "#!/bin/sh\nset -e\necho done > out/result.txt\necho '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n",
        &[],
    );
    let ws = t.path().join("ws");
    fs_err::create_dir_all(ws.join("out")).expect("mkdir");
    let cfg = dead_dns();
    let band = |args: &[&str]| band_in(&cfg, t.path(), args);
    let (code, out, err) = band(&[
        "learn",
        "--json",
        "--write",
        "--skills",
        "skills",
        "--workspace",
        "ws",
        "demo/hello",
        "--name=x",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["status"], "ok", "{doc}");
    assert_eq!(draft_rules(&doc, "write"), ["out/result.txt"], "{doc}");
    // The copy was learn's: the real out/ is still empty.
    assert_eq!(fs_err::read_dir(ws.join("out")).expect("ls").count(), 0);
    let (code, out, err) = band(&[
        "run",
        "--skills",
        "skills",
        "--workspace",
        "ws",
        "demo/hello",
        "--name=x",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        fs_err::read_to_string(ws.join("out/result.txt")).expect("written back"),
        "done\n"
    );
}

/// A script that walks a folder (a shell glob, `os.walk`) reads the files the next input adds
/// there: learn drafts the folder the run listed, `src/**`, not the three files this run read (a
/// trial with public skills: `src/**` narrowed to the files one run read, and the next input's
/// new file silently missed), and the learned band runs on a workspace with a fourth file, which
/// the script reads inside the sandbox.
#[test]
fn privileged_learn_drafts_the_folder_a_script_walks_and_the_next_inputs_new_file_is_read() {
    band_test::privileged!(sandbox_missing());
    const SH_WALK: &str = "#!/bin/sh\nset -e\nout=\nwalk() {\n  for f in \"$1\"/*; do\n    \
                           if [ -d \"$f\" ]; then walk \"$f\"; elif [ -f \"$f\" ]; then \
                           out=\"$out $(cat \"$f\")\"; fi\n  done\n}\nwalk src\n\
                           printf '{\"greeting\":\"%s\"}' \"$out\" > \"$OUTPUT_PATH\"\n";
    const PY_WALK: &str = "import json, os\nout = []\nfor d, dirs, files in os.walk(\"src\"):\n    \
                           for f in files:\n        \
                           out.append(open(os.path.join(d, f)).read().strip())\n\
                           json.dump({\"greeting\": \" \".join(sorted(out))}, \
                           open(os.environ[\"OUTPUT_PATH\"], \"w\"))\n";
    // How the script walks, the script, and the skill's other files.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let cases: [Case<'_>; 2] = [
        ("a shell glob", SH_WALK, &[]),
        (
            "os.walk",
            "#!/bin/sh\nexec python3 /skill/lib/walk.py\n",
            &[("lib/walk.py", PY_WALK)],
        ),
    ];
    for (how, script, files) in cases {
        let t = tempfile::tempdir().expect("tmp");
        unbanded_demo(&t.path().join("skills"), script, files);
        // Three files, each in a folder of its own: no two share one.
        let ws = t.path().join("ws");
        for (path, text) in [
            ("src/a.txt", "alpha"),
            ("src/b/c.txt", "bravo"),
            ("src/d/e.txt", "delta"),
            ("notes.txt", "never read"),
        ] {
            let file = ws.join(path);
            fs_err::create_dir_all(file.parent().expect("folder")).expect("mkdir");
            fs_err::write(file, text).expect("write");
        }
        let cfg = dead_dns();
        let band = |args: &[&str]| band_in(&cfg, t.path(), args);
        let (code, out, err) = band(&[
            "learn",
            "--json",
            "--write",
            "--skills",
            "skills",
            "--workspace",
            "ws",
            "demo/hello",
            "--name=x",
        ]);
        assert_eq!(code, 0, "{how}\n{out}\n{err}");
        let doc: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(doc["status"], "ok", "{how}\n{doc}");
        assert_eq!(draft_rules(&doc, "read"), ["src/**"], "{how}\n{doc}");
        let evidence = doc["draft"]["read"][0]["evidence"].as_str().unwrap_or("");
        assert!(
            evidence.starts_with(
                "listed by the run: a script that walks it reads files the next input adds; read "
            ),
            "{how}\n{doc}"
        );
        let band_md = fs_err::read_to_string(t.path().join("skills/demo/BAND.md")).expect("read");
        assert!(band_md.contains("src/**"), "{how}\n{band_md}");
        // The next input: a fourth file, in a folder the learning run never saw.
        fs_err::create_dir_all(ws.join("src/new")).expect("mkdir");
        fs_err::write(ws.join("src/new/z.txt"), "zulu").expect("write");
        let (code, out, err) = band(&[
            "run",
            "--json",
            "--skills",
            "skills",
            "--workspace",
            "ws",
            "demo/hello",
            "--name=x",
        ]);
        assert_eq!(code, 0, "{how}\n{out}\n{err}");
        let run: Value = serde_json::from_str(&out).expect("json");
        let greeting = run["output"]["greeting"].as_str().unwrap_or("");
        for word in ["alpha", "bravo", "delta", "zulu"] {
            assert!(greeting.contains(word), "{how}: {word} not read\n{run}");
        }
        assert!(!greeting.contains("never read"), "{how}\n{run}");
    }
}

/// The wild trial's folder-walking script (uipath-troubleshoot's `strip-ha-images.sh`): it
/// globs `"$dir"/*.json` with `dir=uia/` and calls a command on each file (`jq -e … uia//ha2.json`)
/// and on a `mktemp` file. Learned from one file, the band runs the next input's second file:
/// each call's path became a pattern of its folder (`uia/*`, `/tmp/*`), not the learning run's
/// names. `sh` with `set -e`, so a refused call fails the run rather than skipping the file.
#[test]
fn privileged_learn_drafts_a_walking_scripts_calls_for_the_files_the_next_input_adds() {
    band_test::privileged!(sandbox_missing());
    const SCRIPT: &str = "#!/bin/sh\nset -e\ndir=src/\nout=\nfor f in \"$dir\"/*.txt; do\n  \
                          sum=$(sha256sum \"$f\")\n  tmp=$(mktemp)\n  cp \"$f\" \"$tmp\"\n  \
                          enc=$(base64 \"$tmp\")\n  rm -f \"$tmp\"\n  \
                          out=\"$out $(printf %s \"$enc\" | base64 -d)\"\ndone\n\
                          printf '{\"greeting\":\"%s\"}' \"$out\" > \"$OUTPUT_PATH\"\n";
    let t = tempfile::tempdir().expect("tmp");
    unbanded_demo(&t.path().join("skills"), SCRIPT, &[]);
    let ws = t.path().join("ws");
    fs_err::create_dir_all(ws.join("src")).expect("mkdir");
    fs_err::write(ws.join("src/a.txt"), "alpha").expect("write");
    let cfg = dead_dns();
    let band = |args: &[&str]| band_in(&cfg, t.path(), args);
    let (code, out, err) = band(&[
        "learn",
        "--json",
        "--write",
        "--skills",
        "skills",
        "--workspace",
        "ws",
        "demo/hello",
        "--name=x",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["status"], "ok", "{doc}");
    let cli = draft_rules(&doc, "cli");
    for rule in ["sha256sum src/*", "base64 /tmp/*"] {
        assert!(
            cli.iter().any(|r| r == rule),
            "{rule} not drafted: {cli:?}\n{doc}"
        );
    }
    // The next input: a second file, named as the learning run never saw.
    fs_err::write(ws.join("src/b.txt"), "bravo").expect("write");
    let (code, out, err) = band(&[
        "run",
        "--json",
        "--skills",
        "skills",
        "--workspace",
        "ws",
        "demo/hello",
        "--name=x",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let run: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(run["output"]["greeting"], " alpha bravo", "{run}");
}

/// learn's observing run may write anywhere, and makes the workspace's empty folders write
/// folders of their own (so a script that fills one is seen): a folder between the workspace and
/// such a folder is the run's too. Before, `out` of an empty `out/empty` was root's, and the
/// script's `mkdir out/new` failed where `band run` worked (sixth wild trial: plugin-forge's
/// empty `commands/`).
#[test]
fn privileged_learn_writes_beside_an_empty_folder_of_the_workspace() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    unbanded_demo(
        &t.path().join("skills"),
        "#!/bin/sh\nset -e\nmkdir out/new\necho made > out/new/f.txt\n\
         printf '{\"greeting\":\"made\"}' > \"$OUTPUT_PATH\"\n",
        &[],
    );
    let ws = t.path().join("ws");
    fs_err::create_dir_all(ws.join("out/empty")).expect("mkdir");
    let cfg = dead_dns();
    let (code, out, err) = band_in(
        &cfg,
        t.path(),
        &[
            "learn",
            "--json",
            "--skills",
            "skills",
            "--workspace",
            "ws",
            "demo/hello",
            "--name=x",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["status"], "ok", "{doc}\n{err}");
    assert!(
        draft_rules(&doc, "write")
            .iter()
            .any(|r| r.starts_with("out/")),
        "{doc}"
    );
}

/// learn offers its observing run only what the site's layers allow (band-server would refuse
/// the whole run otherwise), says what it took away, and says when its draft would not run: the
/// session here denies `jq`, which the script uses.
#[test]
fn privileged_learn_observes_inside_the_site_and_says_what_the_site_refuses() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    unbanded_demo(
        &t.path().join("skills"),
        "#!/bin/sh\njq -r .name \"$INPUT_PATH\" > /dev/null || echo jq_refused >&2\necho '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n",
        &[],
    );
    let session = t.path().join("session.md");
    fs_err::write(&session, "---\ndeny:\n  cli: [\"jq *\"]\n---\n").expect("write");
    let cfg = t.path().join("server.toml");
    fs_err::write(&cfg, "dns_upstream = [\"127.0.0.1:9\"]\n").expect("write");
    let (code, out, err) = bin()
        .env("BAND_SERVER_CONFIG", &cfg)
        .env("BAND_NARROW", &session)
        .run(
            &[
                "learn",
                "--json",
                "--skills",
                "skills",
                "demo/hello",
                "--name=x",
            ],
            t.path(),
        );
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    let notes: Vec<String> = doc["notes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let rule = format!(
        "is refused by the session policy's deny.cli `jq *` ({}:3)",
        session.display()
    );
    assert!(
        notes.iter().any(|n| n
            .starts_with("not offered to the observed run: the band's allow.cli `jq")
            && n.contains(&rule)),
        "{notes:#?}"
    );
    // The script ran without jq: the observed run was admitted, jq refused inside.
    assert!(doc["draft"].is_object(), "{doc}");
    // A draft that still names jq says it would not run here.
    if draft_rules(&doc, "cli").iter().any(|r| r.starts_with("jq")) {
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("this draft would not run here") && n.contains(&rule)),
            "{notes:#?}"
        );
    }
}

/// `band learn`'s observing run is marked in the ledger (`"learn": true`), in `band history`'s
/// table and in `band show`; a real run of the same script is not.
#[test]
fn privileged_learn_s_observing_runs_are_marked_in_the_ledger() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    assert_eq!(bin().run(&["init", "demo"], t.path()).0, 0);
    fs_err::create_dir_all(&skills).expect("mkdir");
    fs_err::rename(t.path().join("demo"), skills.join("demo")).expect("mv");
    let data = t.path().join("data");
    let band = band_test::Band::new(crate::common::band_exe(), &data);
    let args = ["--skills", "skills", "demo/hello", "--name=x"];
    let learn: Vec<&str> = ["learn"].iter().chain(&args).copied().collect();
    let (code, out, err) = band.run(&learn, t.path());
    assert_eq!(code, 0, "{out}\n{err}");
    let run: Vec<&str> = ["run"].iter().chain(&args).copied().collect();
    let (code, out, err) = band.run(&run, t.path());
    assert_eq!(code, 0, "{out}\n{err}");

    let (code, out, _) = band.run(&["history", "--json"], t.path());
    assert_eq!(code, 0);
    let records: Value = serde_json::from_str(&out).expect("json");
    let marks: Vec<(String, Value)> = records
        .as_array()
        .expect("array")
        .iter()
        .map(|r| {
            (
                r["run_id"].as_str().unwrap_or("").to_string(),
                r["learn"].clone(),
            )
        })
        .collect();
    // Newest first: the real run, then learn's.
    assert_eq!(marks.len(), 2, "{out}");
    assert_eq!(
        (&marks[0].1, &marks[1].1),
        (&Value::Null, &Value::Bool(true)),
        "{out}"
    );
    // (The table's columns are as wide as the durations: not a stable snapshot.)
    let table = band.output(&["history"], t.path());
    let rows: Vec<&str> = table
        .stdout
        .lines()
        .filter(|l| l.contains("demo/hello"))
        .collect();
    assert_eq!(rows.len(), 2, "{}", table.shown());
    assert!(
        !rows[0].contains("(learn)") && rows[1].contains("demo/hello (learn)"),
        "{}",
        table.shown()
    );
    let shown = band.output(&["show", &marks[1].0], t.path());
    assert!(
        shown.stdout.contains("observed by  band learn: "),
        "{}",
        shown.shown()
    );
    let real = band.output(&["show", &marks[0].0], t.path());
    assert!(!real.stdout.contains("observed by"), "{}", real.shown());
}

/// A request outside a band's HTTP rule is refused by band-server's egress proxy, and `--trace`
/// names the rule that would allow it, as every layer's refusal does; the request the rule
/// admits reaches the lab's HTTPS server (the test's own CA, the config's `proxy_extra_ca`).
#[test]
fn privileged_a_request_outside_an_http_rule_is_refused_and_traced_with_the_rule() {
    band_test::privileged!(sandbox_missing());
    let lab = band_test::netlab::Lab::new(&["api.learn.test"]);
    let certs = tempfile::tempdir().expect("tmp");
    make_ca_and_cert(certs.path(), "api.learn.test");
    let _server = HttpsServer::start(&lab, certs.path());
    let cfg = certs.path().join("server.toml");
    let base = fs_err::read_to_string(&lab.config).expect("lab config");
    fs_err::write(
        &cfg,
        format!(
            "{base}proxy_extra_ca = \"{}\"\n",
            certs.path().join("ca.crt").display()
        ),
    )
    .expect("write config");
    let t = tempfile::tempdir().expect("tmp");
    let root = unbanded_demo(
        &t.path().join("skills"),
        "#!/bin/sh\nok=$(curl -sS -o /dev/null -w '%{http_code}' https://api.learn.test/ok/page)\nno=$(curl -sS -o /dev/null -w '%{http_code}' -X POST https://api.learn.test/upload)\nprintf '{\"greeting\": \"%s %s\"}' \"$ok\" \"$no\" > \"$OUTPUT_PATH\"\n",
        &[],
    );
    let band_md = root.join("BAND.md");
    let text = fs_err::read_to_string(&band_md).expect("read");
    let text =
        band::learn::edit::set_list(&text, "allow", "cli", &["curl *".to_string()]).expect("edit");
    let text = band::learn::edit::set_list(
        &text,
        "allow",
        "net",
        &["GET https://api.learn.test/ok/**".to_string()],
    )
    .expect("edit");
    fs_err::write(&band_md, text).expect("write");
    let (code, out, err) = bin().env("BAND_SERVER_CONFIG", &cfg).run(
        &[
            "run",
            "--trace",
            "--skills",
            "skills",
            "demo/hello",
            "--name=x",
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let run: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(run["greeting"], "200 403", "{out}\n{err}");
    assert!(
        err.contains("request POST https://api.learn.test/upload (network layer: no allow.net rule matches; to allow it: allow.net \"POST https://api.learn.test/upload\")"),
        "{err}"
    );
    // Only the admitted request reached the server.
    assert_eq!(
        fs_err::read_to_string(certs.path().join("https.log")).unwrap_or_default(),
        "api.learn.test /ok/page\n"
    );
}

/// A skill `demo/hello` in `dir/skills` whose script fetches
/// `https://api.learn.test/items/<name>` (`/admin/<rest>` for a name `admin-<rest>`) with
/// Python's urllib and outputs the status, with an empty allow list.
fn items_skill(dir: &Path) {
    unbanded_demo(
        &dir.join("skills"),
        "#!/bin/sh\npython3 /skill/lib/get.py > \"$OUTPUT_PATH\"\n",
        &[(
            "lib/get.py",
            r#"import json, os, urllib.request, urllib.error
name = json.load(open(os.environ["INPUT_PATH"]))["name"]
path = "/admin/" + name[6:] if name.startswith("admin-") else "/items/" + name
try:
    code = urllib.request.urlopen("https://api.learn.test" + path, timeout=10).status
except urllib.error.HTTPError as e:
    code = e.code
except OSError as e:
    code = "unreachable: %s" % e
print(json.dumps({"greeting": str(code)}))
"#,
        )],
    );
}

/// `band learn --net` through the egress proxy: the observing run's HTTPS request (to the lab's
/// server, with the test's CA as the proxy's `proxy_extra_ca`) is drafted as an HTTP rule, its
/// id a segment glob; the learned band runs the job on another input (another id under the
/// same prefix), and refuses a path it never saw.
#[test]
fn privileged_learn_with_net_drafts_an_http_rule_that_runs_the_next_input() {
    band_test::privileged!(sandbox_missing());
    let lab = band_test::netlab::Lab::new(&["api.learn.test"]);
    let pki = tempfile::tempdir().expect("tmp");
    make_ca_and_cert(pki.path(), "api.learn.test");
    let _server = HttpsServer::start(&lab, pki.path());
    let config = pki.path().join("server.toml");
    let base = fs_err::read_to_string(&lab.config).expect("lab config");
    fs_err::write(
        &config,
        format!(
            "{base}proxy_extra_ca = \"{}\"\n",
            pki.path().join("ca.crt").display()
        ),
    )
    .expect("write config");
    let t = tempfile::tempdir().expect("tmp");
    items_skill(t.path());
    let args = vec![
        "learn",
        "--json",
        "--net",
        "--write",
        "--skills",
        "skills",
        "demo/hello",
        "--name=123",
    ];
    let (code, out, err) = bin()
        .env("BAND_SERVER_CONFIG", &config)
        .run(&args, t.path());
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        draft_rules(&doc, "net"),
        ["GET https://api.learn.test/items/*"],
        "{doc}"
    );
    let evidence = doc["draft"]["net"][0]["evidence"].as_str().unwrap_or("");
    assert!(evidence.contains("GET /items/123"), "{evidence}");
    // The next input: another id under the same prefix, admitted; a path never seen, refused
    // by the proxy (403), the server never asked.
    let run = |name: &str| -> Value {
        let args = vec!["run", "--json", "--skills", "skills", "demo/hello", name];
        let (code, out, err) = bin()
            .env("BAND_SERVER_CONFIG", &config)
            .run(&args, t.path());
        assert_eq!(code, 0, "{out}\n{err}");
        serde_json::from_str(&out).expect("json")
    };
    let next = run("--name=456");
    assert_eq!(next["output"]["greeting"], "200", "{next}");
    let other = run("--name=admin-7");
    assert_eq!(other["output"]["greeting"], "403", "{other}");
    let log = fs_err::read_to_string(pki.path().join("https.log")).unwrap_or_default();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["api.learn.test /items/123", "api.learn.test /items/456"],
        "{log}"
    );
}
