//! Red-team round 3 (issue 36): ledger. A local user plants a symlink (or a hard link, or a FIFO)
//! where band keeps its ledger, hoping band (as root) appends through it; and the ledger's disk
//! fills up, which used to let a run happen with a cut record that `band audit verify` called
//! broken for good. What the user and the ledger see: a refusal naming the ledger, the planted
//! target untouched; a run that does not start when its `start` record cannot be written; a run
//! whose final record does not fit leaves its `start` record and a ledger that verifies, and the
//! next run appends normally once space is freed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use band_test::{Band, SkillBuilder, copy_dir};
use fs_err::os::unix::fs::symlink;
use serde_json::Value;

use crate::common::{band_exe, repo, sandbox_missing};

/// A run refused before any sandbox (its input is invalid): recorded all the same, so it is the
/// ledger's first write, with no root needed.
fn refused_run(band: &Band, dir: &Path) -> (i32, String, String) {
    band.run(
        &["run", "--skills", "skills", "text/count", "--nope=1"],
        dir,
    )
}

fn text_skill(dir: &Path) {
    copy_dir(&repo().join("skills/text"), &dir.join("skills/text"));
    fs_err::remove_file(dir.join("skills/text/band.lock")).ok();
}

/// How a test plants a file at a path.
type Plant<'a> = dyn Fn(&Path) + 'a;

#[test]
fn a_planted_link_or_fifo_for_the_ledger_is_refused_and_its_target_untouched() {
    let t = tempfile::tempdir().unwrap();
    text_skill(t.path());
    let target = t.path().join("precious");
    fs_err::write(&target, "precious\n").unwrap();
    let plant = |name: &str, how: &dyn Fn(&Path)| -> PathBuf {
        let data = t.path().join(format!("data-{name}"));
        fs_err::create_dir_all(&data).unwrap();
        how(&data.join(band::ledger::LEDGER_FILE));
        data
    };
    let cases: [(&str, &Plant<'_>, &str); 3] = [
        (
            "symlink",
            &|p| symlink(&target, p).unwrap(),
            "it is a symbolic link",
        ),
        (
            "hardlink",
            &|p| fs_err::hard_link(&target, p).unwrap(),
            "it has 2 hard links",
        ),
        (
            "fifo",
            &|p| {
                assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
            },
            "it is not a regular file",
        ),
    ];
    for (name, how, reason) in cases {
        let data = plant(name, how);
        let band = Band::new(band_exe(), &data);
        let (code, _, stderr) = refused_run(&band, t.path());
        let ledger = data.join(band::ledger::LEDGER_FILE);
        let want = format!(
            "{}: refusing to use it as a ledger file: {reason}",
            ledger.display()
        );
        assert_ne!(code, 0, "{name}: {stderr}");
        assert!(stderr.contains(&want), "{name}: `{want}` not in:\n{stderr}");
        let (code, _, stderr) = band.run(&["audit", "verify"], t.path());
        assert_ne!(code, 0, "{name}: {stderr}");
        assert!(stderr.contains(&want), "{name}: `{want}` not in:\n{stderr}");
        assert_eq!(fs_err::read_to_string(&target).unwrap(), "precious\n");
    }
    // The lock file too.
    let data = t.path().join("data-lock");
    fs_err::create_dir_all(&data).unwrap();
    symlink(&target, data.join(band::ledger::LOCK_FILE)).unwrap();
    let (code, _, stderr) = refused_run(&Band::new(band_exe(), &data), t.path());
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("it is a symbolic link"), "{stderr}");
    assert_eq!(fs_err::read_to_string(&target).unwrap(), "precious\n");
}

/// A tmpfs of `size` mounted on `dir` for the test's life.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        fs_err::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount a tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Fill the file system of `file` up: write zeros until the disk is full.
fn fill(file: &Path) {
    let mut f = fs_err::File::create(file).unwrap();
    let page = vec![0u8; 4096];
    loop {
        match f.write(&page) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("fill {}: {e}", file.display()),
        }
    }
    f.sync_all().ok();
}

/// The band's frontmatter after `band: chatty`.
const BAND: &str = r#"description: Prints a lot, so its record is long.
version: 1
limit:
  maxRuntimeMs: 20s
"#;

/// A skill whose run record (with `--record-io`) is tens of kilobytes.
fn chatty_skill(dir: &Path) {
    SkillBuilder::new("chatty")
        .description("Prints a lot.")
        .band(BAND)
        .script(
            "chatty.sh",
            "#!/bin/sh\ni=0\nwhile [ $i -lt 600 ]; do\n  echo \"line $i of what this script says, long enough to fill a page\"\n  i=$((i+1))\ndone\necho '{}' > \"$OUTPUT_PATH\"\n",
        )
        .write(dir);
}

fn lines(ledger: &Path) -> Vec<Value> {
    fs_err::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn privileged_a_full_disk_stops_the_run_or_leaves_a_ledger_that_verifies() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    chatty_skill(t.path());
    let _mount = Tmpfs::mount(&t.path().join("disk"), "256k");
    let data = t.path().join("disk/data");
    let ledger = data.join(band::ledger::LEDGER_FILE);
    let band = Band::new(band_exe(), &data);
    let run = |args: &[&str]| {
        let mut all = vec!["run", "--json", "--skills", "."];
        all.extend(args);
        all.push("chatty/chatty");
        band.run(&all, t.path())
    };
    let filler = t.path().join("disk/filler");

    // Full: the start record cannot be written, so the run does not start.
    fill(&filler);
    let (code, stdout, stderr) = run(&[]);
    assert_ne!(code, 0, "{stdout}{stderr}");
    let want = format!(
        "cannot write the run ledger {}; nothing ran",
        ledger.display()
    );
    assert!(
        stderr.contains(&want) || stdout.contains(&want),
        "`{want}` not in:\n{stdout}{stderr}"
    );
    assert_eq!(lines(&ledger).len(), 0, "nothing ran, nothing recorded");

    // Room for the start record, not for the run's record (its stdout, with --record-io).
    let len = fs_err::metadata(&filler).unwrap().len();
    fs_err::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(len - 4096)
        .unwrap();
    let (code, stdout, stderr) = run(&["--record-io"]);
    assert_ne!(code, 0, "{stdout}{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("finished but could not be recorded in the ledger"),
        "{stdout}{stderr}"
    );
    let recs = lines(&ledger);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0]["kind"], "start", "the run left its start record");
    let (code, verify, err) = band.run(&["audit", "verify"], t.path());
    assert_eq!(
        code, 0,
        "a ledger whose last write failed verifies:\n{verify}{err}"
    );
    assert!(verify.contains("1 records, chain intact"), "{verify}");

    // Space freed: the next run appends after it and the chain verifies.
    fs_err::remove_file(&filler).unwrap();
    let (code, _, stderr) = run(&["--record-io"]);
    assert_eq!(code, 0, "{stderr}");
    let recs = lines(&ledger);
    let kinds: Vec<&str> = recs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["start", "start", "run"]);
    let (code, verify, err) = band.run(&["audit", "verify"], t.path());
    assert_eq!(code, 0, "{verify}{err}");
    assert!(verify.contains("3 records, chain intact"), "{verify}");
}

/// A write cut short for real (the kernel stops a write at the disk's end; band could not take
/// the fragment back): `band audit verify` calls it torn, not broken, and the next run sets it
/// aside and goes on. Real tampering is still a break.
#[test]
fn a_torn_last_line_verifies_and_is_set_aside_but_an_edit_is_still_caught() {
    let t = tempfile::tempdir().unwrap();
    text_skill(t.path());
    let data = t.path().join("data");
    let band = Band::new(band_exe(), &data);
    for _ in 0..2 {
        assert_eq!(refused_run(&band, t.path()).0, 3);
    }
    let ledger = data.join(band::ledger::LEDGER_FILE);
    let whole = fs_err::read_to_string(&ledger).unwrap();
    let second = whole.lines().nth(1).unwrap().to_string();
    // The second record's write, cut in the middle.
    let torn = format!(
        "{}{}",
        whole.lines().next().unwrap(),
        format_args!("\n{}", &second[..second.len() / 2])
    );
    fs_err::write(&ledger, &torn).unwrap();
    let (code, verify, err) = band.run(&["audit", "verify"], t.path());
    assert_eq!(code, 0, "{verify}{err}");
    assert!(verify.contains(":2: a write cut short"), "{verify}");
    assert!(verify.contains("1 records, chain intact"), "{verify}");
    assert_eq!(refused_run(&band, t.path()).0, 3);
    let (code, verify, err) = band.run(&["audit", "verify", "--json"], t.path());
    assert_eq!(code, 0, "{verify}{err}");
    let v: Value = serde_json::from_str(&verify).unwrap();
    assert_eq!((v["records"].as_u64(), v.get("torn")), (Some(2), None));
    assert_eq!(
        fs_err::read_to_string(data.join(band::ledger::TORN_FILE)).unwrap(),
        format!("{}\n", &second[..second.len() / 2])
    );
    // An edit of the last record, its newline removed to pass for a cut write: still a break.
    let now = fs_err::read_to_string(&ledger).unwrap();
    let edited = now
        .trim_end()
        .replace("\"status\":\"input_invalid\"", "\"status\":\"ok\"");
    let (first, last) = now.trim_end().rsplit_once('\n').unwrap();
    let edited_last = format!(
        "{first}\n{}",
        last.replace("\"status\":\"input_invalid\"", "\"status\":\"ok\"")
    );
    assert_ne!(edited, now.trim_end());
    fs_err::write(&ledger, &edited_last).unwrap();
    let (code, verify, _) = band.run(&["audit", "verify"], t.path());
    assert_ne!(code, 0, "{verify}");
    assert!(verify.contains(":2: broken record"), "{verify}");
}
