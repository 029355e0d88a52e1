//! What issue 17's cuts of a run's cost must keep: the same sandbox, seen from inside it, and
//! nothing left behind.

use band::proto::Status;
use pretty_assertions::assert_eq;

use super::helpers::*;

/// `/usr` and `/etc` are folders of the sandbox's root, which band-server prepared in the run
/// directory and bubblewrap binds once (it re-reads its mount table for each bind it makes): the
/// library trees and the host's `/etc` folders are mounts inside them, made read-only, nosuid and
/// nodev by band-server itself. Seen from inside: the same trees as before, every mount there
/// read-only, nosuid and nodev, and nothing writable.
#[test]
fn privileged_usr_and_etc_are_prepared_by_band_server_and_read_only_throughout() {
    privileged!();
    let script = "#!/bin/bash\n\
        while read -r _id _parent _dev _root mp opts _rest; do\n\
          case \"$mp\" in /usr|/usr/*|/etc|/etc/*) echo \"mount $mp=$opts\";; esac\n\
        done < /proc/self/mountinfo\n\
        cd /usr && echo \"usr=$(echo *)\"\n\
        for d in /usr /usr/lib /usr/share /usr/bin /usr/local/bin /usr/sbin /etc /etc/ssl/certs /etc/fonts; do\n\
          if (echo x > \"$d/band-probe\") 2>/dev/null; then echo \"write $d=written\"; else echo \"write $d=refused\"; fi\n\
        done\n\
        echo \"certs=$(cd /etc/ssl/certs 2>/dev/null && for f in *; do echo yes; break; done)\"\n";
    let o = run(&request(script, policy()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let mounts: Vec<(&str, &str)> = kv
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("mount ")?, v.as_str())))
        .collect();
    for (at, opts) in &mounts {
        let opts: Vec<&str> = opts.split(',').collect();
        for flag in ["ro", "nosuid", "nodev"] {
            assert!(opts.contains(&flag), "{at} is not {flag}: {opts:?}");
        }
    }
    let at: Vec<&str> = mounts.iter().map(|(m, _)| *m).collect();
    let mut want: Vec<String> = Vec::new();
    want.extend(
        band_server::layers::fs::execmask::LIB_ROOTS
            .iter()
            .filter(|r| fs_err::symlink_metadata(r).is_ok_and(|m| m.is_dir()))
            .map(|r| r.to_string()),
    );
    want.extend(
        band_server::layers::fs::workdir::ETC_HOST_DIRS
            .iter()
            .map(|d| format!("/etc/{d}"))
            .filter(|d| std::path::Path::new(d).exists()),
    );
    want.sort();
    let mut got: Vec<String> = at.iter().map(|s| s.to_string()).collect();
    got.sort();
    assert_eq!(got, want, "{o:#?}");
    let usr = kv.get("usr").cloned().unwrap_or_default();
    for d in ["bin", "lib", "local", "sbin", "share"] {
        assert!(usr.split(' ').any(|x| x == d), "no /usr/{d}: {usr}");
    }
    for (k, v) in kv.iter().filter(|(k, _)| k.starts_with("write ")) {
        assert_eq!(v, "refused", "{k}: {o:#?}");
    }
    if std::path::Path::new("/etc/ssl/certs").is_dir() {
        assert_eq!(kv.get("certs").map(String::as_str), Some("yes"), "{o:#?}");
    }
}

const WHO: &str = r#"echo "user=$(awk -F: -v u="$(awk '/^Uid:/{print $2}' /proc/self/status)" '$3==u{print $1}' /etc/passwd)""#;

/// A state directory of the test's own (uids are locked host-wide, so it is safe next to the
/// suite's `/run/band-test`): other runs cannot move its lease hint under the test.
struct OwnState(OwnStateDir);

impl OwnState {
    fn new(tag: &str) -> OwnState {
        let dir = OwnStateDir::new(&format!("band-test-{tag}-"));
        fs_err::create_dir_all(dir.path().join("leases")).unwrap_or_else(|e| panic!("{e}"));
        OwnState(dir)
    }

    fn set_hint(&self, slot: u32) {
        fs_err::write(
            band_server::layers::identity::uidpool::hint_path(self.0.path()),
            slot.to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    fn spawn(&self, script: &str) -> std::process::Child {
        let line = serde_json::to_string(&band::proto::Message::Request(Box::new(request(
            script,
            policy(),
        ))))
        .unwrap_or_else(|e| panic!("{e}"));
        spawn_line_in(
            &line,
            std::path::Path::new("/nonexistent/band-test/server.toml"),
            self.0.path(),
        )
    }
}

/// The slot (`band-run-<n>`) a run printed with [`WHO`], read as soon as it is printed.
fn slot_of(child: &mut std::process::Child) -> u32 {
    use std::io::BufRead as _;
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut lines = std::io::BufReader::new(stdout).lines();
    while let Some(Ok(line)) = lines.next() {
        let msg = serde_json::from_str::<band::proto::Message>(&line);
        let text = match msg {
            Ok(band::proto::Message::Event(band::proto::Event::Stdout { data })) => data,
            Ok(band::proto::Message::Result(r)) => panic!("the run ended first: {r:#?}"),
            _ => continue,
        };
        if let Some(n) = text
            .lines()
            .find_map(|l| l.strip_prefix("user=band-run-"))
            .and_then(|n| n.trim().parse().ok())
        {
            return n;
        }
    }
    panic!("the run never printed its user");
}

/// The uid lease starts at the pool's hint (`<state>/leases/hint`) instead of trying every busy
/// slot from 0, and still never hands out a busy slot: pointed at a free high slot, a run takes
/// it (before the hint it took the lowest free one); pointed at a slot a live run holds, runs
/// started together each get another slot, all different.
#[test]
fn privileged_the_lease_starts_at_the_hint_and_never_shares_a_slot() {
    privileged!();
    let state = OwnState::new("hint");
    state.set_hint(40);
    let holding = format!("#!/bin/bash\n{WHO}\nsleep 1.5\n");
    let mut first = state.spawn(&holding);
    let held = slot_of(&mut first);
    // The hint at the held slot: every run started now must go past it, each to its own slot.
    state.set_hint(held);
    // Each ends at its own time (0.4 s apart): the hint is read and lowered without a lock, so
    // releases at the same moment may leave it at any of their slots (by design: it is only
    // where a search starts), and the check below wants them one after the other.
    let mut others: Vec<std::process::Child> = (0..3)
        .map(|i| {
            state.spawn(&format!(
                "#!/bin/bash\n{WHO}\nsleep {}\n",
                2.0 + 0.4 * f64::from(i)
            ))
        })
        .collect();
    let mut slots: Vec<u32> = others.iter_mut().map(slot_of).collect();
    slots.push(held);
    // Every run ends before any assertion (the state directory is removed on drop).
    for mut c in others.into_iter().chain([first]) {
        let _ = c.wait();
    }
    // Another state directory may hold 40's uid host-wide: then the next free one.
    assert!(
        held >= 40,
        "the run took slot {held}, not the hint's 40 or after"
    );
    let mut distinct = slots.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), slots.len(), "a slot was shared: {slots:?}");
    // Released slots lower the hint again: the lowest of them is where the next run looks.
    let hint = band_server::layers::identity::uidpool::read_hint(state.0.path());
    assert!(
        hint <= *slots.iter().min().unwrap_or(&0),
        "hint {hint} after releasing {slots:?}"
    );
}

/// Whatever of run `run_id` is still on the host: its run and exec folders, mounts, cgroup
/// folders (v1 or v2), a lease naming it, its processes (see [`processes_of_run`]: `window`
/// runs from before its server started to a moment while that server still held `uid`).
fn leftovers_of(run_id: &str, uid: u32, window: std::ops::Range<u64>) -> Vec<String> {
    let mut left = Vec::new();
    let state = state_dir();
    for dir in [
        state.join("runs").join(run_id),
        state.join("exec/runs").join(run_id),
    ] {
        if dir.exists() {
            left.push(format!("folder {}", dir.display()));
        }
    }
    let mounts = fs_err::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    left.extend(
        mounts
            .lines()
            .filter(|l| l.contains(run_id))
            .map(|l| format!("mount {l}")),
    );
    let cgroup = std::path::Path::new("/sys/fs/cgroup");
    let mut roots = vec![cgroup.to_path_buf()];
    if let Ok(rd) = fs_err::read_dir(cgroup) {
        roots.extend(rd.filter_map(Result::ok).map(|e| e.path()));
    }
    for r in roots {
        let d = r.join("band").join(run_id);
        if d.exists() {
            left.push(format!("cgroup {}", d.display()));
        }
    }
    if let Ok(rd) = fs_err::read_dir(state.join("leases")) {
        for e in rd.filter_map(Result::ok) {
            if fs_err::read_to_string(e.path()).is_ok_and(|t| t.contains(run_id)) {
                left.push(format!("lease {}", e.path().display()));
            }
        }
    }
    left.extend(
        processes_of_run(uid, run_id, window)
            .iter()
            .map(|p| format!("process {p:?}")),
    );
    left
}

/// The run directory is made on a thread beside the spawn, whose sandbox init (in the run's
/// cgroup, as the run's uid) waits at a gate before bubblewrap's exec. A run directory that fails
/// half made (its tmpfs is full: the skill is larger than `maxDiskBytes`) closes that gate: the
/// run fails in the filesystem layer with the run directory's own error, its script never ran,
/// and nothing of it is left (folders, mounts, cgroup, lease, a process in its cgroup).
#[test]
fn privileged_a_run_directory_that_fails_half_made_starts_nothing_and_leaves_nothing() {
    privileged!();
    let mut p = policy();
    p.limits.max_disk_bytes = Some(1 << 20);
    let big = "x".repeat(2 << 20);
    let req = request_with(
        &[
            ("run.sh", 0o755, "#!/bin/bash\necho ran\n"),
            ("data/big.txt", 0o644, &big),
        ],
        "run.sh",
        p,
    );
    let (o, window) = run_marked(&req);
    assert_eq!(
        o.result.status,
        Status::SetupFailed,
        "{:#?}",
        o.result.error
    );
    let e = o.result.error.clone().unwrap_or_else(|| panic!("no error"));
    assert_eq!(e.layer, band::proto::Layer::Filesystem, "{e:?}");
    assert!(
        e.message.contains("No space left on device"),
        "{}",
        e.message
    );
    assert!(!o.result.stdout.contains("ran"), "{}", o.result.stdout);
    wait_until_no_lease_names(&req.run_id);
    // No uid to look for (the run never said which it had): its processes are found by cgroup.
    assert_eq!(
        leftovers_of(&req.run_id, u32::MAX - 1, window),
        Vec::<String>::new()
    );
}

/// The result goes out before the run's mounts, folders, cgroups and lease are removed, and
/// standard output closes with it (band's client goes on without waiting for band-server to
/// exit). Killed right after its result, band-server leaves what it had not removed yet to
/// the janitor, which removes all of it: nothing of the run is left.
#[test]
fn privileged_killed_right_after_its_result_band_server_leaves_nothing_to_the_janitor() {
    use std::io::BufRead as _;
    privileged!();
    let script = format!("#!/bin/bash\n{WHO}\nsleep 0.2 &\necho done\n");
    let req = request(&script, policy());
    let run_id = req.run_id.clone();
    let from = marker();
    let mut child = spawn(&req);
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let lines = std::io::BufReader::new(stdout).lines();
    let mut result = None;
    for line in lines {
        let line = line.unwrap_or_else(|e| panic!("{e}"));
        if let Ok(band::proto::Message::Result(r)) =
            serde_json::from_str::<band::proto::Message>(&line)
        {
            result = Some(*r);
            break;
        }
    }
    // band-server is alive, so it still holds the run's uid: processes of that uid started
    // before this marker are the run's, later ones another run's.
    let mark = marker();
    // At once: the removal may be under way.
    let _ = child.kill();
    let _ = child.wait();
    let result = result.unwrap_or_else(|| panic!("no result"));
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    let user = result
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("user="))
        .unwrap_or_else(|| panic!("no user in {result:#?}"))
        .to_string();
    let uid = uid_of(&user).unwrap_or_else(|| panic!("no uid for {user}"));
    run_janitor(Some(std::path::Path::new(
        "/nonexistent/band-test/server.toml",
    )));
    wait_until_no_lease_names(&run_id);
    let left = leftovers_of(&run_id, uid, from..mark);
    assert!(left.is_empty(), "left of {run_id}: {left:#?}");
}

/// The probes' `mount <at>=<opts>` lines: each mount point with its options, in order.
fn mount_options(
    kv: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<&str, Vec<&str>> {
    kv.iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("mount ")?, v.split(',').collect())))
        .collect()
}

/// The probes' `path <at>=<kind>` lines, in the order of their paths.
fn probe_paths(kv: &std::collections::BTreeMap<String, String>) -> Vec<(&str, &str)> {
    kv.iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("path ")?, v.as_str())))
        .collect()
}

/// The probe of [`privileged_the_root_is_one_bind_prepared_by_band_server`]: every mount with
/// its flags (`mount <at>=<opts>`), and every path of the sandbox's tree that is not under a
/// mount other than `/` (`path <at>=dir|file|link|mount`), walked with bash's builtins only.
const ROOT_PROBE: &str = "#!/bin/bash\n\
    shopt -s dotglob nullglob\n\
    mps=' '\n\
    while read -r _id _parent _dev _root mp opts _rest; do\n\
      mps=\"$mps$mp \"; echo \"mount $mp=$opts\"\n\
    done < /proc/self/mountinfo\n\
    walk() {\n\
      local f\n\
      for f in \"$1\"/*; do\n\
        if [[ -L $f ]]; then echo \"path $f=link\"\n\
        elif [[ $mps == *\" $f \"* ]]; then echo \"path $f=mount\"\n\
        elif [[ -d $f ]]; then echo \"path $f=dir\"; walk \"$f\"\n\
        else echo \"path $f=file\"; fi\n\
      done\n\
    }\n\
    walk ''\n\
    for d in / /usr /etc /skill /band /proc /dev /opt /run; do\n\
      if (echo x > \"$d/band-probe\") 2>/dev/null; then echo \"write $d=written\"; else echo \"write $d=refused\"; fi\n\
      if mkdir \"$d/band-probe-dir\" 2>/dev/null; then echo \"mkdir $d=made\"; else echo \"mkdir $d=refused\"; fi\n\
    done\n";

/// The sandbox's root is one bind of a tree band-server prepared in the run directory (`usr/`,
/// `etc/`, `skill/`, `/band`, the links, the mount points, and the writable folders bound on it),
/// read-only on top: bubblewrap binds only what it must (`/proc`, `/dev`). Seen from inside: `/usr` and `/etc` are no
/// longer mounts of their own (they were binds before), every mount keeps the flags it had
/// (read-only, nosuid, nodev except the four writable noexec folders, `/dev/shm` among them,
/// bubblewrap's `/proc` and
/// the device mounts under `/dev`), nothing can be written or made outside them, and the root
/// holds exactly the paths it held before: the same folders, files and links (compared with the build before this
/// change: the same listing, except that `/usr` and `/etc` were mounts).
#[test]
fn privileged_the_root_is_one_bind_prepared_by_band_server() {
    privileged!();
    let o = run(&request(ROOT_PROBE, policy()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let mounts = mount_options(&kv);
    let host_has = |p: &str| fs_err::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let lib_roots: Vec<&str> = band_server::layers::fs::execmask::LIB_ROOTS
        .iter()
        .copied()
        .filter(|r| host_has(r))
        .collect();
    let etc_host: Vec<String> = band_server::layers::fs::workdir::ETC_HOST_DIRS
        .iter()
        .map(|d| format!("/etc/{d}"))
        .filter(|d| host_has(d))
        .collect();
    // The mounts: the root, the host's trees in it, bubblewrap's own, nothing else.
    let mut want: Vec<String> = [
        "/",
        "/skill",
        "/proc",
        "/dev",
        "/workspace",
        "/tmp",
        "/band",
        "/band/io",
    ]
    .map(String::from)
    .to_vec();
    want.extend(lib_roots.iter().map(|r| r.to_string()));
    want.extend(etc_host.iter().cloned());
    want.sort();
    let mut got: Vec<String> = mounts
        .keys()
        .filter(|m| !m.starts_with("/dev/") && !m.starts_with("/proc/"))
        .map(|m| m.to_string())
        .collect();
    got.sort();
    assert_eq!(got, want, "{o:#?}");
    // Below /proc: exactly the covers of the host's kernel facts (issue 36), each read-only.
    let mut covers: Vec<String> =
        band_server::layers::fs::procmask::plan(std::path::Path::new("/proc"))
            .expect("the host's /proc")
            .iter()
            .map(|m| m.sandbox_path().display().to_string())
            .collect();
    covers.sort();
    let mut under_proc: Vec<String> = mounts
        .keys()
        .filter(|m| m.starts_with("/proc/"))
        .map(|m| m.to_string())
        .collect();
    under_proc.sort();
    assert_eq!(under_proc, covers, "{o:#?}");
    assert!(mounts.contains_key("/dev/shm"), "{o:#?}");
    for (at, opts) in &mounts {
        let (must, must_not): (&[&str], &[&str]) = match *at {
            "/workspace" | "/tmp" | "/band/io" | "/dev/shm" => {
                (&["rw", "nosuid", "nodev", "noexec"], &[])
            }
            "/proc" => (&["nosuid", "nodev", "noexec"], &[]),
            d if d.starts_with("/proc/") => (&["ro", "nosuid", "nodev"], &["rw"]),
            "/skill" => (&["ro", "nosuid", "nodev", "noexec"], &[]),
            // Its own tmpfs, whose device nodes must work: read-only, not nodev.
            "/dev" => (&["ro", "nosuid", "noexec"], &["rw"]),
            d if d.starts_with("/dev/") => (&["nosuid"], &[]),
            _ => (&["ro", "nosuid", "nodev"], &["rw"]),
        };
        for f in must {
            assert!(opts.contains(f), "{at} is not {f}: {opts:?}");
        }
        for f in must_not {
            assert!(!opts.contains(f), "{at} is {f}: {opts:?}");
        }
    }
    // Nothing is written or made anywhere but in the writable folders.
    for (k, v) in kv
        .iter()
        .filter(|(k, _)| k.starts_with("write ") || k.starts_with("mkdir "))
    {
        assert_eq!(v, "refused", "{k}: {o:#?}");
    }
    // The tree of the root (not descending into other mounts): exactly these paths.
    let state_top = state_dir()
        .components()
        .nth(1)
        .map(|c| format!("/{}", c.as_os_str().to_string_lossy()))
        .unwrap_or_default();
    let state = state_dir().display().to_string();
    let mut top = vec![
        ("/band", "mount"),
        ("/bin", "link"),
        ("/dev", "mount"),
        ("/etc", "dir"),
        ("/lib", "link"),
        ("/lib64", "link"),
        ("/proc", "mount"),
        ("/sbin", "link"),
        ("/skill", "mount"),
        ("/tmp", "mount"),
        ("/usr", "dir"),
        ("/workspace", "mount"),
    ];
    // The links at the programs' cache paths (the essential commands' copies).
    top.push((state_top.as_str(), "dir"));
    let etc_files = [
        "band-bash-env",
        "group",
        "hosts",
        "ld.so.cache",
        "nsswitch.conf",
        "passwd",
    ];
    let mut wrappers = 0;
    for (k, kind) in probe_paths(&kv) {
        let ok = if !k[1..].contains('/') {
            top.contains(&(k, kind))
        } else if let Some(rel) = k.strip_prefix("/etc/") {
            (etc_files.contains(&rel) && kind == "file")
                // The host's time zone, copied where the host has it.
                || (matches!(rel, "localtime" | "timezone")
                    && kind == "file"
                    && std::path::Path::new(k).exists())
                || (rel == "ssl" && kind == "dir")
                || (etc_host.iter().any(|d| d == k) && kind == "mount")
        } else if let Some(rel) = k.strip_prefix("/usr/") {
            match (rel, kind) {
                ("bin" | "local", "dir") | ("sbin" | "local/bin", "link") => true,
                (r, "link") if r.starts_with("bin/") && !r[4..].contains('/') => {
                    wrappers += 1;
                    true
                }
                (_, "mount") => lib_roots.contains(&k),
                _ => false,
            }
        } else if format!("{state}/exec/cache").starts_with(k) {
            kind == "dir"
        } else if let Some(rel) = k.strip_prefix(&format!("{state}/exec/cache/")) {
            // <hash>/ and <hash>/<name>, a link to the wrapper.
            match rel.split('/').count() {
                1 => kind == "dir",
                2 => kind == "link",
                _ => false,
            }
        } else {
            false
        };
        assert!(ok, "unexpected {k} ({kind}) in the sandbox's root: {o:#?}");
    }
    for (at, kind) in &top {
        assert_eq!(
            kv.get(&format!("path {at}")).map(String::as_str),
            Some(*kind),
            "{at}: {o:#?}"
        );
    }
    assert!(wrappers > 0, "no wrappers in /usr/bin: {o:#?}");
}

/// The probe of [`privileged_dev_is_prepared_by_band_server`]: what `/dev` holds, and
/// whether its devices work, with bash's builtins only.
const DEV_PROBE: &str = "#!/bin/bash\n\
    shopt -s dotglob nullglob\n\
    for f in /dev/*; do\n\
      if [[ -L $f ]]; then echo \"path $f=link\"\n\
      elif [[ -c $f ]]; then echo \"path $f=char\"\n\
      elif [[ -d $f ]]; then echo \"path $f=dir\"\n\
      else echo \"path $f=other\"; fi\n\
    done\n\
    [[ /dev/ptmx -ef /dev/pts/ptmx ]] && echo ptmx_link=pts\n\
    [[ /dev/fd -ef /proc/self/fd ]] && echo fd_link=proc\n\
    if echo x > /dev/null; then echo null=written; else echo null=refused; fi\n\
    if read -r -n 1 -d '' z < /dev/zero; then echo zero=read; else echo zero=refused; fi\n\
    if read -r -n 8 u < /dev/urandom; then echo urandom=read; else echo urandom=refused; fi\n\
    if (echo x > /dev/full) 2>/dev/null; then echo full=written; else echo full=refused; fi\n\
    if exec 7<>/dev/ptmx; then echo ptmx=opened; else echo ptmx=refused; fi\n\
    pts=''; for f in /dev/pts/*; do pts=\"$pts ${f#/dev/pts/}\"; done; echo \"pts=${pts# }\"\n\
    n=1; while [ $n -lt 100 ] && exec {t}<>/dev/ptmx 2>/dev/null; do n=$((n + 1)); done; echo \"ptys=$n\"\n\
    for d in /dev /dev/shm /dev/pts; do\n\
      if (echo x > \"$d/band-probe\") 2>/dev/null; then echo \"write $d=written\"; else echo \"write $d=refused\"; fi\n\
    done\n\
    while read -r _id _parent _dev _root mp opts _rest; do\n\
      [[ $mp == /dev || $mp == /dev/* ]] && echo \"mount $mp=$opts\"\n\
    done < /proc/self/mountinfo\n\
    true\n";

/// `/dev` is prepared by band-server, not bubblewrap's `--dev` (six binds and a read-only remount
/// of its own): a tmpfs of its own in the root's one bind, its device nodes made with `mknod`
/// (where binding the host's took two mount calls each). Seen from inside it is what `--dev`
/// made: the same entries, usable devices (`/dev/full` refuses writes as a device does), a
/// pseudo-terminal from the run's own devpts instance (only the run's terminal is in
/// `/dev/pts`; at most 32 of them), nothing writable in `/dev` itself; `/dev` read-only, nosuid and
/// noexec, with the devpts and the run's own `/dev/shm` (writable, nodev, noexec: POSIX shared
/// memory, `multiprocessing`) mounted in it.
#[test]
fn privileged_dev_is_prepared_by_band_server() {
    privileged!();
    let o = run(&request(DEV_PROBE, policy()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let paths = probe_paths(&kv);
    let mut want = vec![
        ("/dev/core", "link"),
        ("/dev/fd", "link"),
        ("/dev/full", "char"),
        ("/dev/null", "char"),
        ("/dev/ptmx", "link"),
        ("/dev/pts", "dir"),
        ("/dev/random", "char"),
        ("/dev/shm", "dir"),
        ("/dev/stderr", "link"),
        ("/dev/stdin", "link"),
        ("/dev/stdout", "link"),
        ("/dev/tty", "char"),
        ("/dev/urandom", "char"),
        ("/dev/zero", "char"),
    ];
    want.sort();
    assert_eq!(paths, want, "{o:#?}");
    for (k, v) in [
        ("null", "written"),
        ("zero", "read"),
        ("urandom", "read"),
        ("full", "refused"),
        ("ptmx", "opened"),
        ("ptmx_link", "pts"),
        ("fd_link", "proc"),
        ("pts", "0 ptmx"),
        // At most 32 (`RUN_PTYS`): every run's count against one host-wide bound.
        ("ptys", "32"),
        ("write /dev", "refused"),
        ("write /dev/shm", "written"),
        ("write /dev/pts", "refused"),
    ] {
        assert_eq!(kv.get(k).map(String::as_str), Some(v), "{k}: {o:#?}");
    }
    let mounts = mount_options(&kv);
    let at: Vec<&str> = mounts.keys().copied().collect();
    assert_eq!(at, ["/dev", "/dev/pts", "/dev/shm"], "{o:#?}");
    for (m, opts) in &mounts {
        for f in ["nosuid", "noexec"] {
            assert!(opts.contains(&f), "{m} is not {f}: {opts:?}");
        }
        if *m == "/dev" {
            assert!(opts.contains(&"ro"), "/dev is not ro: {opts:?}");
        }
        if *m == "/dev/shm" {
            assert!(opts.contains(&"nodev"), "/dev/shm is not nodev: {opts:?}");
        }
    }
}
