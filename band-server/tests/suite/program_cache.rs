//! Red-team round 3 (issue 36): one skill cannot fill the shared program cache.
//!
//! A skill's own programs go into the state directory's program cache charged to the user who
//! asked for the run (`SUDO_UID` of the band-server started through sudo) and to the skill, within
//! `[program_cache]` bounds of the server config (shrunk here to a few MiB). A run that asks for
//! more than its share fails before its sandbox starts, with an error of the CLI layer that names
//! the program and the bound; another user's run afterwards runs its commands as before.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use band::proto::{self, FileEntry, Layer, Message, RunRequest, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

const MIB: usize = 1 << 20;

/// A copy of `touch` padded to `size` bytes with `fill` (the kernel ignores what follows an ELF's
/// segments): distinct programs of any size, made in memory.
fn big_program(size: usize, fill: u8) -> Vec<u8> {
    let mut data = fs_err::read("/usr/bin/touch").unwrap_or_else(|e| panic!("{e}"));
    assert!(data.len() < size);
    data.resize(size, fill);
    data
}

/// A run of skill `skill` whose bundle ships `programs` (`bin/<name>`, allowed with any
/// arguments) and whose entry runs `script`.
fn request(skill: &str, programs: &[(&str, Vec<u8>)], script: &str, host: &[&str]) -> RunRequest {
    let mut bundle: Vec<FileEntry> = programs
        .iter()
        .map(|(name, data)| file(&format!("bin/{name}"), 0o755, data))
        .collect();
    bundle.push(file("run.sh", 0o755, script.as_bytes()));
    let mut policy = policy();
    policy.allow.cli = programs
        .iter()
        .map(|(name, _)| format!("./bin/{name} *"))
        .chain(host.iter().map(|h| h.to_string()))
        .collect();
    bundle_request(skill, bundle, policy)
}

/// band-server started for user `uid` (as sudo would start it), with `config`.
fn spawn_for(uid: u32, req: &RunRequest, config: &Path) -> Child {
    use std::io::Write;
    let line = serde_json::to_string(&Message::Request(Box::new(req.clone())))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(server())
        .arg("run")
        .env(band_server::config::STATE_DIR_ENV, STATE_DIR)
        .env(band_server::config::CONFIG_ENV, config)
        .env("SUDO_UID", uid.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start band-server: {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    stdin
        .write_all(line.as_bytes())
        .and_then(|()| stdin.write_all(b"\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    drop(stdin);
    child
}

#[test]
fn privileged_a_skill_over_its_share_of_the_program_cache_fails_alone() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = dir.path().join("server.toml");
    fs_err::write(
        &config,
        "[program_cache]\nper_skill = \"8m\"\nper_owner = \"12m\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Users no other test runs as.
    let (hog, other) = (4_136_001, 4_136_002);
    let probe = |names: &[&str]| {
        let mut s = String::from("#!/bin/sh\n");
        for n in names {
            s.push_str(&format!("/skill/bin/{n} /tmp/{n}; echo \"{n}=$?\"\n"));
        }
        s
    };

    // Within its share: the skill's 5 MiB program runs.
    let req = request(
        "hog-small",
        &[("big1", big_program(5 * MIB, 1))],
        &probe(&["big1"]),
        &[],
    );
    let o = finish(spawn_for(hog, &req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert_eq!(o.kv().get("big1").map(String::as_str), Some("0"), "{o:#?}");

    // Two 5 MiB programs of one skill: over the 8 MiB a skill may keep there. The run fails
    // before its sandbox starts (nothing of the script ran), naming the layer, the program, the
    // bound and what to do.
    let req = request(
        "hog-big",
        &[
            ("big2", big_program(5 * MIB, 2)),
            ("big3", big_program(5 * MIB, 3)),
        ],
        &probe(&["big2", "big3"]),
        &[],
    );
    let o = finish(spawn_for(hog, &req, &config));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    assert_eq!(o.result.stdout, "", "{o:#?}");
    let e = o.result.error.as_ref().unwrap_or_else(|| panic!("{o:#?}"));
    assert_eq!(e.layer, Layer::Cli, "{e:?}");
    assert!(
        e.message.contains("`./bin/big3`")
            && e.message.contains("per-skill bound of 8 MiB")
            && e.message.contains(&format!("uid {hog}")),
        "{e:?}"
    );
    assert!(
        e.hint
            .as_deref()
            .is_some_and(|h| h.contains("[program_cache]")),
        "{e:?}"
    );

    // Another user, afterwards: a program of the same content (its own copy) and host commands
    // run as before.
    let req = request(
        "tool",
        &[("big1", big_program(5 * MIB, 1))],
        &format!("{}echo hi | tr a-z A-Z\n", probe(&["big1"])),
        &["tr a-z A-Z"],
    );
    let o = finish(spawn_for(other, &req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert_eq!(o.result.stdout, "big1=0\nHI\n", "{o:#?}");
}

/// A folder under `/var/tmp` (the run's uid can read it; the sandbox has its own `/tmp`),
/// removed at the end.
struct Root(std::path::PathBuf);

impl Drop for Root {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

fn write(p: &Path, data: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = p.parent() {
        fs_err::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
    }
    fs_err::write(p, data).unwrap_or_else(|e| panic!("{e}"));
    fs_err::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The cache entries charged to `uid` that hold a file named `name` (`o<uid>-<skill>-<key>/`).
fn charged_entries(uid: u32, name: &str) -> Vec<String> {
    let cache = Path::new(STATE_DIR).join("exec/cache");
    let mut out: Vec<String> = fs_err::read_dir(&cache)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("o{uid}-")) && cache.join(n).join(name).is_file())
        .collect();
    out.sort();
    out
}

/// Issue 36, item 5 (a user's programs): a program inside a runtime tree that a user owns (a
/// venv's, an npm package's vendored binary under their home) is no host program: it is charged
/// to the user and skill of the run that calls it, like the skill's own programs, so declaring
/// many large ones fills that user's share, never the part of the cache other users' host
/// programs need. Before, it was copied on its first call as a host program, charged to nobody.
/// Over the share, the call is refused where the user looks: band-shim's line on the command's
/// stderr (the program, the bound and the hint) and a `program_cache` limit event on the run's
/// record; the server log alone had it before, and the command saw "cannot hand the program
/// over". Another user's run of the same tree gets its own entry, and root's programs still run.
#[test]
fn privileged_a_users_program_in_a_runtime_tree_is_charged_to_them_and_refused_past_their_share() {
    privileged!();
    if !Path::new("/usr/bin/node").exists() {
        eprintln!("skipped: needs /usr/bin/node");
        return;
    }
    let (hog, other) = (4_136_003, 4_136_004);
    let root = Root(std::path::PathBuf::from(format!(
        "/var/tmp/band-cache-rt-{}",
        run_id()
    )));
    let r = &root.0;
    // An npm CLI (root's), whose package vendors two programs the user owns: a small one and
    // one of 2 MiB.
    let pkg = r.join("lib/node_modules/fakecli");
    write(&pkg.join("package.json"), br#"{"name": "fakecli"}"#, 0o644);
    write(
        &pkg.join("cli.js"),
        b"#!/usr/bin/env node\nconsole.log('fakecli=ok');\n",
        0o755,
    );
    let echo = fs_err::read("/usr/bin/echo").unwrap_or_else(|e| panic!("{e}"));
    let (small, big) = (pkg.join("vendor/small"), pkg.join("vendor/big"));
    write(&small, &echo, 0o755);
    let mut padded = echo.clone();
    padded.resize(2 * MIB, 7);
    write(&big, &padded, 0o755);
    for f in [&small, &big] {
        fs_err::os::unix::fs::chown(f, Some(hog), Some(hog)).unwrap_or_else(|e| panic!("{e}"));
    }
    fs_err::create_dir_all(r.join("bin")).unwrap_or_else(|e| panic!("{e}"));
    fs_err::os::unix::fs::symlink("../lib/node_modules/fakecli/cli.js", r.join("bin/fakecli"))
        .unwrap_or_else(|e| panic!("{e}"));
    let config = r.join("server.toml");
    write(
        &config,
        format!(
            "bin_path = [\"{}\", \"/usr/local/bin\", \"/usr/bin\", \"/bin\"]\n\
             [program_cache]\nper_skill = \"1m\"\nper_owner = \"1m\"\n",
            r.join("bin").display()
        )
        .as_bytes(),
        0o644,
    );
    let script = format!(
        "#!/bin/sh\nfakecli\n{small} small=yes; echo \"small_code=$?\"\n{big} big=yes; echo \"big_code=$?\"\n{big} big=again; echo \"again_code=$?\"\necho hi | tr a-z A-Z\n",
        small = small.display(),
        big = big.display()
    );
    let rules = ["fakecli", "small *", "big *", "tr a-z A-Z"];

    // The user's run: the small program is theirs in the cache and runs; the big one is over
    // their 1 MiB and refused, and they are told why, twice on stderr, once on the record.
    // (Earlier runs of this test left entries of their own trees: only new ones count.)
    let (hog_before, other_before) = (
        charged_entries(hog, "small"),
        charged_entries(other, "small"),
    );
    let new = |uid: u32, before: &[String]| -> Vec<String> {
        charged_entries(uid, "small")
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect()
    };
    let req = request("vendored", &[], &script, &rules);
    let o = finish(spawn_for(hog, &req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("fakecli"), "ok", "{o:#?}");
    assert_eq!(
        (get("small"), get("small_code")),
        ("yes".into(), "0".into())
    );
    assert_eq!(get("big"), "<missing big>", "{o:#?}");
    assert_eq!(
        (get("big_code"), get("again_code")),
        ("126".into(), "126".into())
    );
    assert!(o.result.stdout.ends_with("HI\n"), "{o:#?}");
    let hog_small = new(hog, &hog_before);
    assert_eq!(hog_small.len(), 1, "charged to the user");
    assert!(charged_entries(hog, "big").is_empty(), "nothing copied");
    let said = format!(
        "band: big: program `{}` (2 MiB) does not fit in the program cache: skill `vendored` of uid {hog} would keep",
        big.display()
    );
    let lines: Vec<&str> = o.result.stderr.lines().collect();
    let at: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].starts_with(&said))
        .collect();
    assert_eq!(at.len(), 2, "{:?}", o.result.stderr);
    for i in at {
        assert!(
            lines[i].ends_with("over the per-skill bound of 1 MiB (program_cache.per_skill)"),
            "{}",
            lines[i]
        );
        assert!(
            lines.get(i + 1).is_some_and(|h| h.starts_with("hint: ")
                && h.contains("`per_skill` under [program_cache] in /etc/band/server.toml")),
            "{:?}",
            o.result.stderr
        );
    }
    let limits: Vec<(&str, &str)> = o
        .events
        .iter()
        .filter_map(|e| match e {
            proto::Event::Limit { limit, detail } => Some((limit.as_str(), detail.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(limits.len(), 1, "once per program: {limits:?}");
    assert_eq!(limits[0].0, "program_cache");
    assert!(
        limits[0].1.starts_with(&said["band: big: ".len()..])
            && limits[0].1.contains("per_skill")
            && limits[0].1.contains("; hint: "),
        "{limits:?}"
    );
    // The call itself was allowed: the rule holds, the cache refused.
    assert!(
        o.result
            .cli_calls
            .iter()
            .any(|c| c.argv == ["big", "big=yes"] && c.allowed),
        "{o:#?}"
    );

    // Another user's run of the same tree: its own entry of the small program, never the first
    // user's; root's `tr` and `node` run as ever.
    let req = request("vendored", &[], &script, &rules);
    let o = finish(spawn_for(other, &req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(kv.get("fakecli").map(String::as_str), Some("ok"), "{o:#?}");
    assert_eq!(
        kv.get("small_code").map(String::as_str),
        Some("0"),
        "{o:#?}"
    );
    assert!(o.result.stdout.ends_with("HI\n"), "{o:#?}");
    let other_small = new(other, &other_before);
    assert_eq!(other_small.len(), 1, "charged to the other user");
    assert_ne!(other_small, hog_small);
}
