//! What issue 17's cuts of a run's cost must keep: the same sandbox, seen from inside it, and
//! nothing left behind.

use band::proto::Status;
use pretty_assertions::assert_eq;

use super::helpers::*;

/// `/usr` and `/etc` are each one bind of a tree band-server prepared in the run directory
/// (bubblewrap re-reads its mount table for each bind it makes): the library trees and the
/// host's `/etc` folders are mounts inside them, made read-only, nosuid and nodev by
/// band-server itself. Seen from inside: the same trees as before, every mount there read-only,
/// nosuid and nodev, and nothing writable.
#[test]
fn privileged_usr_and_etc_are_one_bind_each_and_read_only_throughout() {
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
    let mut want: Vec<String> = vec!["/usr".into(), "/etc".into()];
    want.extend(
        band_server::layers::fs::execmask::LIB_ROOTS
            .iter()
            .filter(|r| std::path::Path::new(r).is_dir())
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
