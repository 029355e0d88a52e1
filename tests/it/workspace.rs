//! The workspace a run reads and writes: never a system folder unless asked for
//! (`--allow-system-workspace`), and never read or written through a symlink, even one that a
//! concurrent process swaps in while band copies files in and back (issue 13, items 1 and 8).
//! `privileged_*` tests run the real sandbox and skip without root unless `BAND_TEST_MUST_RUN=1`;
//! the refusals need no sandbox (nothing starts).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use band_test::band_snapshot;

use crate::common::{bin, output, repo, sandbox_missing};

/// `band run text/count` (a skill that reads no workspace file) with the repository's skills,
/// from `cwd`, with `extra` arguments before the target.
fn count_in(cwd: &Path, extra: &[&str]) -> band_test::Output {
    let skills = repo().join("skills");
    let mut args = vec!["run", "--skills", skills.to_str().expect("utf-8")];
    args.extend(extra);
    args.extend(["text/count", "--text=x"]);
    output(&args, cwd)
}

#[test]
fn a_system_folder_is_refused_as_the_workspace() {
    band_snapshot!(
        count_in(repo(), &["--workspace", "/etc"]),
        "workspace_etc_refused"
    );
    // Inside one (it lies in /etc), above one (it holds /var/cache), and the root itself:
    // refused too, each saying why.
    for (dir, name) in [
        ("/etc/cron.d", "workspace_inside_etc_refused"),
        ("/var", "workspace_above_var_cache_refused"),
        ("/", "workspace_root_refused"),
        // `..` and symlinks are resolved before the check: /usr/../etc is /etc.
        ("/usr/../etc", "workspace_dotdot_etc_refused"),
    ] {
        band_snapshot!(count_in(repo(), &["--workspace", dir]), name);
    }
}

#[test]
fn a_run_started_in_a_system_folder_is_refused() {
    // No --workspace: the current directory is the workspace, and /etc is refused.
    band_snapshot!(
        count_in(Path::new("/etc"), &[]),
        "workspace_cwd_etc_refused"
    );
    // band exec takes the same path.
    let band = repo().join("skills/text/BAND.md");
    let out = output(
        &[
            "exec",
            "--band",
            band.to_str().expect("utf-8"),
            "--workspace",
            "/usr",
            "--",
            "wc",
            "x",
        ],
        repo(),
    );
    band_snapshot!(out, "workspace_exec_usr_refused");
}

#[test]
fn privileged_allow_system_workspace_overrides_the_refusal() {
    band_test::privileged!(sandbox_missing());
    let out = count_in(repo(), &["--workspace", "/etc", "--allow-system-workspace"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn privileged_under_sudo_a_folder_you_do_not_own_is_refused() {
    band_test::privileged!(sandbox_missing());
    // band runs as root here; SUDO_UID says another user started it. The folder is root's.
    let ws = tempfile::tempdir().expect("tempdir");
    let run = |extra: &[&str]| {
        let skills = repo().join("skills");
        let w = ws.path().to_str().expect("utf-8");
        let mut args = vec!["run", "--skills", skills.to_str().expect("utf-8")];
        args.extend(["--workspace", w]);
        args.extend(extra);
        args.extend(["text/count", "--text=x"]);
        band_test::Output::of(&mut bin().env("SUDO_UID", "65534").command(&args, repo()))
    };
    band_snapshot!(run(&[]), "workspace_not_the_sudo_users");
    let out = run(&["--allow-system-workspace"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The invoking user's own folder needs no flag.
    std::os::unix::fs::chown(ws.path(), Some(65534), None).expect("chown");
    let out = run(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// What the reading skill's script does: print every file it sees under `d/` (`path=content`,
/// shell builtins only, so no command policy is involved).
const READ_SCRIPT: &str = "#!/bin/sh\n\
    for f in d/* d/*/*; do\n\
    \x20 if [ -f \"$f\" ]; then\n\
    \x20   printf '%s=' \"$f\"\n\
    \x20   while IFS= read -r l || [ -n \"$l\" ]; do printf '%s' \"$l\"; done < \"$f\"\n\
    \x20   printf '\\n'\n\
    \x20 fi\n\
    done\n";

/// What the writing skill's script does: write `d/w00.txt` … `d/w19.txt`.
const WRITE_SCRIPT: &str = "#!/bin/sh\n\
    for i in 00 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15 16 17 18 19; do\n\
    \x20 printf 'PWNED\\n' > d/w$i.txt\n\
    done\n";

/// A skill `name` with one script `probe` (`body`), whose band allows `category` (`read` or
/// `write`) on `d/**`. (Two skills, so a refused write-back does not hide what a read leaked.)
fn race_skill(root: &Path, name: &str, category: &str, body: &str) {
    let skill = root.join(name);
    fs_err::create_dir_all(skill.join("scripts")).expect("mkdir");
    fs_err::create_dir_all(skill.join("schemas/input")).expect("mkdir");
    fs_err::write(
        skill.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Races on d/.\n---\n"),
    )
    .expect("write");
    fs_err::write(
        skill.join("BAND.md"),
        format!(
            "---\nband: {name}\ndescription: Uses the workspace's d/ folder.\nversion: 1\n\
             allow:\n  {category}: [\"d/**\"]\nlimit:\n  maxRuntimeMs: 10s\n---\n"
        ),
    )
    .expect("write");
    fs_err::write(
        skill.join("schemas/input/probe.json"),
        r#"{"type":"object"}"#,
    )
    .expect("write");
    let script = skill.join("scripts/probe.sh");
    fs_err::write(&script, body).expect("write");
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn privileged_workspace_races_never_read_or_write_outside_it() {
    band_test::privileged!(sandbox_missing());
    let tmp = tempfile::tempdir().expect("tempdir");
    let skills = tmp.path().join("skills");
    race_skill(&skills, "race-read", "read", READ_SCRIPT);
    race_skill(&skills, "race-write", "write", WRITE_SCRIPT);
    // A root-only folder outside the workspace, with secrets under the same names as workspace
    // files (so a read through a swapped-in link finds one: many names, many chances).
    let private = tmp.path().join("private");
    fs_err::create_dir(&private).expect("mkdir");
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let ws = tmp.path().join("ws");
    fs_err::create_dir_all(ws.join("d/sub")).expect("mkdir");
    let secrets: Vec<String> = (0..20).map(|i| format!("s{i:02}")).collect();
    for name in &secrets {
        fs_err::write(private.join(name), "TOPSECRET").expect("write");
        fs_err::write(ws.join("d").join(name), "public").expect("write");
    }
    // The same tree on both sides: a walk that wanders through the link finds every name.
    fs_err::create_dir(private.join("sub")).expect("mkdir");
    fs_err::write(private.join("sub/s00"), "TOPSECRET").expect("write");
    fs_err::write(ws.join("d/sub/s00"), "public").expect("write");
    fs_err::os::unix::fs::symlink(&private, ws.join("swap")).expect("symlink");

    // The attacker: swap ws/d (a folder) and ws/swap (a link to the private folder), atomically
    // and as fast as it can, for as long as band runs.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, ws) = (Arc::clone(&stop), ws.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    ws.join("d"),
                    rustix::fs::CWD,
                    ws.join("swap"),
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .expect("exchange");
                swaps += 1;
            }
            swaps
        })
    };
    let (mut runs, mut saw_public, mut wrote_back) = (0, 0, 0);
    let mut leaked = Vec::new();
    let started = Instant::now();
    while runs < 40 && started.elapsed() < Duration::from_secs(20) {
        let w = ws.to_str().expect("utf-8");
        let s = skills.to_str().expect("utf-8");
        let out = output(
            &[
                "run",
                "--json",
                "--skills",
                s,
                "--workspace",
                w,
                if runs % 2 == 0 {
                    "race-read/probe"
                } else {
                    "race-write/probe"
                },
            ],
            tmp.path(),
        );
        runs += 1;
        eprintln!(
            "DBG {} {}",
            out.code,
            out.stderr.lines().next().unwrap_or("")
        );
        if out.stdout.contains("TOPSECRET") || out.stderr.contains("TOPSECRET") {
            leaked.push(format!("run {runs} read the secret: {}", out.stdout));
        }
        if out.stdout.contains("d/s00=public") {
            saw_public += 1;
        }
        let extra: Vec<String> = names(&private)
            .into_iter()
            .filter(|n| !secrets.contains(n) && n != "sub")
            .collect();
        if !extra.is_empty() {
            leaked.push(format!(
                "run {runs} wrote into the private folder: {extra:?}"
            ));
            for n in &extra {
                fs_err::remove_file(private.join(n)).expect("clean up");
            }
        }
        for name in &secrets {
            if fs_err::read_to_string(private.join(name)).expect("read") != "TOPSECRET" {
                leaked.push(format!("run {runs} overwrote {name}"));
                fs_err::write(private.join(name), "TOPSECRET").expect("write");
            }
        }
        // The files written back land in the workspace's d/ (under either name, as it is
        // swapped); count and remove them.
        for d in ["d", "swap"] {
            if fs_err::symlink_metadata(ws.join(d)).is_ok_and(|m| m.is_dir()) {
                for n in names(&ws.join(d)).iter().filter(|n| n.starts_with('w')) {
                    wrote_back += 1;
                    let _ = fs_err::remove_file(ws.join(d).join(n));
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    assert!(
        leaked.is_empty(),
        "{} runs, {swaps} swaps:\n{}",
        runs,
        leaked.join("\n")
    );
    assert!(swaps > 1000, "only {swaps} swaps");
    eprintln!("{runs} runs, {swaps} swaps, {saw_public} saw d/, {wrote_back} files written back");
    // With the swapper stopped (and d/ the folder again), the same runs copy in and back: the
    // race runs above were refused or skipped because of the race, not for another reason.
    if fs_err::symlink_metadata(ws.join("d")).is_ok_and(|m| m.is_symlink()) {
        fs_err::rename(ws.join("d"), ws.join("link")).expect("rename");
        fs_err::rename(ws.join("swap"), ws.join("d")).expect("rename");
        fs_err::rename(ws.join("link"), ws.join("swap")).expect("rename");
    }
    let (w, s) = (ws.to_str().expect("utf-8"), skills.to_str().expect("utf-8"));
    for (script, check) in [
        ("race-read/probe", "d/s00=public"),
        ("race-write/probe", ""),
    ] {
        let out = output(
            &["run", "--json", "--skills", s, "--workspace", w, script],
            tmp.path(),
        );
        assert_eq!(out.code, 0, "{script}: {}", out.stderr);
        assert!(out.stdout.contains(check), "{script}: {}", out.stdout);
        assert!(!out.stdout.contains("TOPSECRET"), "{}", out.stdout);
    }
    assert_eq!(
        fs_err::read_to_string(ws.join("d/w19.txt")).expect("written back"),
        "PWNED\n"
    );
}
