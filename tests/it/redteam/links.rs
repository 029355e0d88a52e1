//! Red-team round 3 (issue 36, items 1 and 2): a skill folder whose files are symlinks out of it.
//! `band run` refuses such a skill (S009); every other command that reads a skill folder reads
//! its files the same way ([`band::skillfs`]): `band mcp` offers none of it and never reads
//! through the link, `band lint` never quotes the link's target, `band fmt` and `band learn
//! --write` never rewrite it, `band list`/`help`/`explain` show nothing of it.
//!
//! Each test plants a canary: a secret in an environment variable of the command (read back
//! through `/proc/self/environ`) or in a file outside the skill, and asserts it appears nowhere
//! in what the command prints or serves.

use fs_err::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{bin, repo};
use crate::mcp::Raw;

const CANARY: &str = "canary-7f3a9c1e-not-for-your-eyes";

/// A copy of the shipped `text` skill in `dir/skills/<name>`, its `file` replaced by a symlink to
/// `target`. Returns the skills folder.
fn linked_skill(dir: &Path, name: &str, file: &str, target: &Path) -> PathBuf {
    let skills = dir.join("skills");
    let root = skills.join(name);
    band_test::copy_dir(&repo().join("skills/text"), &root);
    let _ = fs_err::remove_file(root.join("band.lock"));
    fs_err::remove_file(root.join(file)).expect("rm");
    symlink(target, root.join(file)).expect("symlink");
    skills
}

/// A file outside any skill holding the canary (YAML-ish, so a parser error would quote it).
fn canary_file(dir: &Path) -> PathBuf {
    let p = dir.join("outside-secret.txt");
    fs_err::write(&p, format!("AWS_SECRET={CANARY}\n: [ {CANARY}\n")).expect("write");
    p
}

fn tool_names(tools: &Value) -> Vec<String> {
    tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

/// The critical finding: a SKILL.md linked to `/proc/self/environ` made `resources/read` return
/// band mcp's whole environment. Now the skill is not offered at all, and reading its URI is an
/// error that quotes nothing of the target.
#[test]
fn mcp_serves_nothing_of_a_skill_linked_out_of_itself() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = linked_skill(
        t.path(),
        "evil",
        "SKILL.md",
        Path::new("/proc/self/environ"),
    );
    // A second skill whose SKILL.md is a plain file but whose script folder holds a link out.
    let other = skills.join("half");
    band_test::copy_dir(&repo().join("skills/text"), &other);
    symlink(canary_file(t.path()), other.join("scripts/data.txt")).expect("symlink");
    // And a clean one, offered as usual.
    band_test::copy_dir(&repo().join("skills/text"), &skills.join("clean"));
    let md = fs_err::read_to_string(skills.join("clean/SKILL.md")).expect("read");
    fs_err::write(
        skills.join("clean/SKILL.md"),
        md.replace("name: text", "name: clean"),
    )
    .expect("write");
    let env = bin().env("BAND_REDTEAM_CANARY", CANARY);
    let (mut raw, init) = Raw::start_in(&[&skills], t.path(), &[], env);
    let resources = raw.request("resources/list", json!({}));
    let tools = raw.request("tools/list", json!({}));
    let read = raw.request("resources/read", json!({"uri": "skill://evil/SKILL.md"}));
    let left_out = raw.request("resources/read", json!({"uri": "band://not-offered"}));
    let everything = format!("{init}{resources}{tools}{read}{left_out}");
    assert!(!everything.contains(CANARY), "{everything}");
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r["uri"].as_str().expect("uri"))
        .collect();
    assert_eq!(
        uris,
        ["skill://clean/SKILL.md", "band://not-offered"],
        "{resources}"
    );
    assert_eq!(
        tool_names(&tools),
        ["clean__count", "clean__summary"],
        "{tools}"
    );
    assert!(read["code"].is_i64(), "an error, not contents: {read}");
    let text = left_out["contents"][0]["text"].as_str().expect("text");
    assert!(
        text.contains("evil/count: SKILL.md is a symlink that leads outside the skill")
            && text
                .contains("half/count: scripts/data.txt is a symlink that leads outside the skill"),
        "{text}"
    );
}

/// The read itself is safe, not only the catalog: a SKILL.md swapped for a link after band mcp
/// listed it is refused when read.
#[test]
fn mcp_refuses_a_skill_md_swapped_for_a_link_after_listing() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    band_test::copy_dir(&repo().join("skills/text"), &skills.join("text"));
    let (mut raw, _) = Raw::start(&[&skills], t.path());
    let listed = raw.request("resources/list", json!({}));
    assert!(listed.to_string().contains("skill://text/SKILL.md"));
    let md = skills.join("text/SKILL.md");
    fs_err::remove_file(&md).expect("rm");
    symlink(canary_file(t.path()), &md).expect("symlink");
    let read = raw.request("resources/read", json!({"uri": "skill://text/SKILL.md"}));
    assert!(!read.to_string().contains(CANARY), "{read}");
    assert!(
        read["message"]
            .as_str()
            .is_some_and(|m| m.contains("a link that leads outside the skill")),
        "{read}"
    );
}

/// `band lint`, the pre-commit hook: a BAND.md or SKILL.md linked out of the skill is S009 and
/// its target is never quoted, in the human, JSON or SARIF output.
#[test]
fn lint_never_quotes_the_target_of_a_linked_band_or_skill_md() {
    let t = tempfile::tempdir().expect("tmp");
    let secret = canary_file(t.path());
    for file in ["BAND.md", "SKILL.md", "scripts/summary.band.md"] {
        let dir = tempfile::tempdir_in(t.path()).expect("tmp");
        let skills = linked_skill(dir.path(), "evil", file, &secret);
        for format in ["human", "json", "sarif"] {
            let out = bin().output(&["lint", "--format", format, "."], &skills);
            let shown = out.shown();
            assert!(!shown.contains(CANARY), "{file} {format}: {shown}");
            assert_eq!(out.code, 1, "{file} {format}: {shown}");
            assert!(shown.contains("S009"), "{file} {format}: {shown}");
        }
        let out = bin().output(&["lint", "."], &skills);
        band_test::band_snapshot!(
            out,
            format!("lint_linked_{}", file.replace(['/', '.'], "_")),
            &[(skills.to_str().expect("utf8"), "[SKILLS]")]
        );
    }
}

/// A band file linked to the environment of the process that reads it.
#[test]
fn lint_and_explain_show_nothing_of_a_band_md_linked_to_proc() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = linked_skill(t.path(), "evil", "BAND.md", Path::new("/proc/self/environ"));
    let b = bin().env("BAND_REDTEAM_CANARY", CANARY);
    for args in [
        &["lint", "."][..],
        &["explain", "--skills", ".", "evil/count"][..],
        &["list", "--skills", "."][..],
        &["help", "--skills", ".", "evil/count"][..],
        &["fmt", "--check", "."][..],
        &["lock", "evil"][..],
    ] {
        let out = b.output(args, &skills);
        assert!(!out.shown().contains(CANARY), "{args:?}: {}", out.shown());
    }
}

/// `band fmt` and `band learn --write` rewrite band files; a band file linked to a file outside
/// the skill (a user's `~/.bashrc`) is never rewritten.
#[test]
fn fmt_never_writes_through_a_link_out_of_the_skill() {
    let t = tempfile::tempdir().expect("tmp");
    let victim = t.path().join("bashrc");
    // A band file fmt would reformat (unsorted, odd spacing), so only the link stops the write.
    let text = "---\nband:   victim\nversion: 1\nallow:\n  cli: [\"jq -r .text /band/io/input.json\"]\n---\n";
    fs_err::write(&victim, text).expect("write");
    let skills = linked_skill(t.path(), "evil", "BAND.md", &victim);
    let out = bin().output(&["fmt", "."], &skills);
    assert_ne!(out.code, 0, "{}", out.shown());
    assert!(
        out.shown().contains("a link that leads outside the skill"),
        "{}",
        out.shown()
    );
    assert_eq!(fs_err::read_to_string(&victim).expect("read"), text);
    assert!(
        fs_err::symlink_metadata(skills.join("evil/BAND.md"))
            .expect("stat")
            .is_symlink()
    );
}

/// A FIFO where SKILL.md should be does not stall `band lint` or `band mcp` (they open files
/// `O_NONBLOCK` and refuse what is not a regular file).
#[test]
fn a_fifo_for_skill_md_is_refused_not_waited_on() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    let root = skills.join("fifo");
    band_test::copy_dir(&repo().join("skills/text"), &root);
    fs_err::remove_file(root.join("SKILL.md")).expect("rm");
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("SKILL.md"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let out = bin().output(&["lint", "."], &skills);
    assert_eq!(out.code, 1, "{}", out.shown());
    assert!(
        out.shown().contains("not a regular file (a FIFO)"),
        "{}",
        out.shown()
    );
    let (mut raw, _) = Raw::start(&[&skills], t.path());
    let read = raw.request("resources/read", json!({"uri": "skill://fifo/SKILL.md"}));
    assert!(read["code"].is_i64(), "{read}");
}

/// What lint prints at a terminal: a file name carrying escape sequences (OSC 52 writes the
/// clipboard) shows as text.
#[test]
fn lint_prints_hostile_file_names_inert() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    let root = skills.join("text");
    band_test::copy_dir(&repo().join("skills/text"), &root);
    let evil = root.join("scripts/\u{1b}]52;c;Y3VybCBldmlsfHNo\u{7}x.band.md");
    fs_err::write(&evil, "---\nband: x\nversion: 1\nallow: {cli: [5]}\n---\n").expect("write");
    let out = bin().output(&["lint", "."], &skills);
    assert!(!out.stdout.contains('\u{1b}'), "{:?}", out.stdout);
    assert!(out.stdout.contains("^[]52;c;"), "{}", out.stdout);
}
