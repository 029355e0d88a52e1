//! band-server's end of the shim report socket: accept, verify the peer, recompute the decision,
//! forward the call to the run loop. See `shim` for the protocol.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use band::proto::CliCall;

use crate::shim::{self, CliRules, ShimReport};
use crate::sys;

/// Longest report line accepted (argv can be long, but not unbounded).
pub const MAX_REPORT_BYTES: u64 = 1 << 20;
/// Concurrent report connections handled at once; more wait in the backlog.
const MAX_HANDLERS: usize = 32;

/// What the report thread tells the run loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    Call(CliCall),
    Forged(String),
}

/// `(st_dev, st_ino)` of a file.
pub type FileId = (u64, u64);

/// What a genuine shim process looks like from `/proc`.
#[derive(Debug, Clone)]
pub struct PeerCheck {
    pub shim: FileId,
    /// Devices that hold the system libraries (`/usr/lib`, `/usr/lib64`).
    pub lib_devs: Vec<u64>,
    pub uid: u32,
}

impl PeerCheck {
    /// `lib_trees`: the directories bound as `/usr/lib` etc. in the sandbox (the host trees, or
    /// the run's masked overlays of them, which have a device of their own).
    pub fn for_shim(shim: &Path, uid: u32, lib_trees: &[PathBuf]) -> std::io::Result<PeerCheck> {
        let m = std::fs::metadata(shim)?;
        let mut lib_devs = Vec::new();
        let defaults = [PathBuf::from("/usr/lib"), PathBuf::from("/usr/lib64")];
        for d in defaults.iter().chain(lib_trees) {
            if let Ok(m) = std::fs::metadata(d)
                && !lib_devs.contains(&m.dev())
            {
                lib_devs.push(m.dev());
            }
        }
        Ok(PeerCheck {
            shim: (m.dev(), m.ino()),
            lib_devs,
            uid,
        })
    }
}

/// One line of `/proc/<pid>/maps` that is backed by a file: (dev, inode, path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub dev: u64,
    pub inode: u64,
    pub path: String,
}

/// The file-backed mappings in a `/proc/<pid>/maps` text (inode ≠ 0).
pub fn parse_maps(text: &str) -> Result<Vec<Mapping>, String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        let mut fields = [""; 5];
        for f in fields.iter_mut() {
            rest = rest.trim_start();
            let end = rest.find(' ').unwrap_or(rest.len());
            *f = &rest[..end];
            rest = &rest[end..];
        }
        let inode: u64 = fields[4]
            .parse()
            .map_err(|_| format!("bad maps line {line:?}"))?;
        if inode == 0 {
            continue;
        }
        let (maj, min) = fields[3]
            .split_once(':')
            .ok_or_else(|| format!("bad maps line {line:?}"))?;
        let maj = u64::from_str_radix(maj, 16).map_err(|_| format!("bad maps line {line:?}"))?;
        let min = u64::from_str_radix(min, 16).map_err(|_| format!("bad maps line {line:?}"))?;
        out.push(Mapping {
            dev: libc::makedev(maj as u32, min as u32),
            inode,
            path: rest.trim().to_string(),
        });
    }
    Ok(out)
}

/// Is every file-backed mapping the shim itself or a system library?
pub fn check_mappings(maps: &[Mapping], check: &PeerCheck) -> Result<(), String> {
    for m in maps {
        if (m.dev, m.inode) == check.shim {
            continue;
        }
        let lib_path = ["/usr/lib/", "/usr/lib64/", "/lib/", "/lib64/"]
            .iter()
            .any(|p| m.path.starts_with(p))
            && !m.path.ends_with(" (deleted)");
        if lib_path && check.lib_devs.contains(&m.dev) {
            continue;
        }
        return Err(format!(
            "maps {} (dev {}, inode {})",
            m.path, m.dev, m.inode
        ));
    }
    Ok(())
}

/// Verify that `pid` is a genuine shim process of the run's uid.
pub fn verify_peer(pid: i32, uid: u32, check: &PeerCheck) -> Result<(), String> {
    if uid != check.uid {
        return Err(format!("peer uid {uid} is not the run's uid {}", check.uid));
    }
    let exe = std::fs::metadata(format!("/proc/{pid}/exe"))
        .map_err(|e| format!("pid {pid}: exe: {e}"))?;
    if (exe.dev(), exe.ino()) != check.shim {
        return Err(format!("pid {pid} is not the shim"));
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("pid {pid}: maps: {e}"))?;
    check_mappings(&parse_maps(&maps)?, check).map_err(|e| format!("pid {pid} {e}"))
}

fn nonce() -> std::io::Result<String> {
    let mut b = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Where verified reports go. Called before the shim is told `ok`, so a report is always
/// recorded before the command it reports can run (or the run can end).
pub type OnReport = Arc<dyn Fn(Report) + Send + Sync>;

fn handle(
    conn: UnixStream,
    check: &PeerCheck,
    rules: &CliRules,
    on_report: &OnReport,
) -> Result<(), String> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let cred = sys::peer_cred(&conn).map_err(|e| format!("SO_PEERCRED: {e}"))?;
    let n = nonce().map_err(|e| format!("nonce: {e}"))?;
    (&conn)
        .write_all(format!("{n}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new((&conn).take(MAX_REPORT_BYTES))
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let report: ShimReport =
        serde_json::from_str(line.trim_end()).map_err(|e| format!("bad report: {e}"))?;
    let verdict = (|| {
        if report.nonce != n {
            return Err("wrong nonce".to_string());
        }
        if report.argv.is_empty() {
            return Err("empty argv".to_string());
        }
        verify_peer(cred.pid, cred.uid, check)
    })();
    match verdict {
        Ok(()) => {
            on_report(Report::Call(shim::decide(rules, &report.argv)));
            (&conn).write_all(b"ok\n").map_err(|e| e.to_string())?;
            Ok(())
        }
        Err(e) => {
            let _ = (&conn).write_all(b"refused\n");
            Err(e)
        }
    }
}

/// The accept loop, on its own thread.
pub struct ReportListener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ReportListener {
    /// Bind `path` (owned root:`gid`, mode 0660) and start accepting.
    pub fn start(
        path: &Path,
        gid: u32,
        check: PeerCheck,
        rules: CliRules,
        on_report: OnReport,
    ) -> std::io::Result<ReportListener> {
        let listener = UnixListener::bind(path)?;
        std::os::unix::fs::lchown(path, Some(0), Some(gid))?;
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o660))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let check = Arc::new(check);
        let rules = Arc::new(rules);
        let active = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::Builder::new()
            .name("reports".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    while active.load(Ordering::SeqCst) >= MAX_HANDLERS {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    active.fetch_add(1, Ordering::SeqCst);
                    let (check, rules, on_report, active2) = (
                        Arc::clone(&check),
                        Arc::clone(&rules),
                        Arc::clone(&on_report),
                        Arc::clone(&active),
                    );
                    let spawned =
                        std::thread::Builder::new()
                            .name("report".into())
                            .spawn(move || {
                                if let Err(e) = handle(conn, &check, &rules, &on_report) {
                                    on_report(Report::Forged(e));
                                }
                                active2.fetch_sub(1, Ordering::SeqCst);
                            });
                    if spawned.is_err() {
                        active.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })?;
        Ok(ReportListener {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// Stop accepting and join the thread (handlers still running finish on their own).
    pub fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            // Wake the blocking accept().
            let _ = UnixStream::connect(&self.path);
            let _ = t.join();
        }
    }
}

impl Drop for ReportListener {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a10000 r--p 00000000 fd:01 1234                       /band/shim
55d0c0a10000-55d0c0a90000 r-xp 00010000 fd:01 1234                       /band/shim
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 
7f1e2c200000-7f1e2c228000 r--p 00000000 fd:01 777                        /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd5a1f0000-7ffd5a211000 rw-p 00000000 00:00 0                          [stack]
7ffd5a3c4000-7ffd5a3c6000 r-xp 00000000 00:00 0                          [vdso]
";

    fn check() -> PeerCheck {
        PeerCheck {
            shim: (libc::makedev(0xfd, 1), 1234),
            lib_devs: vec![libc::makedev(0xfd, 1)],
            uid: 1000,
        }
    }

    #[test]
    fn maps_parse_file_backed_only() {
        let got = parse_maps(MAPS).unwrap_or_default();
        let paths: Vec<&str> = got.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "/band/shim",
                "/band/shim",
                "/usr/lib/x86_64-linux-gnu/libc.so.6"
            ]
        );
        assert_eq!(got[2].dev, libc::makedev(0xfd, 1));
        assert_eq!(check_mappings(&got, &check()), Ok(()));
    }

    #[test]
    fn a_preloaded_library_outside_the_system_libs_is_refused() {
        for extra in [
            "7f00-7f01 r-xp 00000000 00:2a 99 /tmp/evil.so",
            "7f00-7f01 r-xp 00000000 00:2a 99 /usr/lib/evil.so",
            "7f00-7f01 r-xp 00000000 00:01 99 /memfd:x (deleted)",
            "7f00-7f01 r-xp 00000000 fd:01 99 /workspace/lib.so",
            "7f00-7f01 r-xp 00000000 fd:01 98 /usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)",
        ] {
            let maps = parse_maps(&format!("{MAPS}{extra}\n")).unwrap_or_default();
            assert!(check_mappings(&maps, &check()).is_err(), "{extra}");
        }
    }
}
