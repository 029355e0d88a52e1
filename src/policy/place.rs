//! Where an absolute `read`/`write` pattern points inside the sandbox: one answer for
//! `band lint` and band-server, so nothing lints clean and then fails at run, or the other way.
//!
//! The sandbox has its own root. Some of it is the run's own, some is the host's system content
//! shown read-only, and only the rest can be bound from the host by a rule:
//!
//! | Pattern under | read | write |
//! |---|---|---|
//! | `/tmp` | the run's private `/tmp` (empty at start, gone after; `HOME` is there too): no host file is shown | the same: writable without a rule |
//! | `/usr/lib`, `/usr/lib64`, `/usr/share`, `/usr/libexec`, `/lib`, `/lib64` | already shown read-only | refused: system content is read-only |
//! | `/usr/bin`, `/bin`, `/usr/sbin`, `/sbin` | the run's own programs (`allow.cli`) | refused |
//! | `/usr` itself | the parts above | refused |
//! | other `/usr/…` (`/usr/local`, `/usr/include`) | not shown: the rule adds nothing (a lint warning) | refused |
//! | `/skill`, `/proc`, `/dev` | the sandbox's own (the skill read-only, its `/proc`, its standard devices) | `/dev`: its standard devices; the others refused |
//! | `/workspace` | refused: write the pattern relative to the workspace | refused |
//! | `/band`, `/run`, `/var/run`, `/sys`, `/boot` | refused: the sandbox manages them | refused |
//! | `/root`, `/etc/shadow`, `/etc/gshadow`, `/etc/sudoers(.d)` | refused: never exposed | refused |
//! | `/`, `/etc`, or a prefix above any of these | refused: a bind would cover the sandbox's own paths | refused |
//! | anything else (`/data/**`, `/srv/x.csv`, `/etc/ssl/certs/**`) | the host path, bound read-only | bound writable |
//!
//! (`~` is refused when the pattern is parsed: see [`super::fs`].)

use std::path::{Path, PathBuf};

use super::fs::FsPattern;

/// Where one absolute pattern points (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The run's private `/tmp`: no host bind, nothing from the host.
    PrivateTmp,
    /// Something the sandbox shows anyway (its `/usr` libraries and data, its own `/dev`,
    /// `/proc`, `/skill`): no host bind.
    Shown(&'static str),
    /// A read under `/usr` that the sandbox does not show: no bind, the rule adds nothing.
    NotShown(&'static str),
    /// A host path to bind: the pattern's static prefix.
    Host(PathBuf),
    /// The rule cannot be honoured: the run is refused, and lint says the same.
    Refused { message: String, hint: String },
}

/// System trees the sandbox shows read-only (libraries and data).
const SHOWN_SYSTEM: &[&str] = &[
    "/usr/lib",
    "/usr/lib64",
    "/usr/share",
    "/usr/libexec",
    "/lib",
    "/lib64",
];
/// Program folders: inside the sandbox they hold the run's declared programs only.
const PROGRAM_DIRS: &[&str] = &["/usr/bin", "/bin", "/usr/sbin", "/sbin"];
/// Trees the sandbox manages itself: no rule may name them.
const MANAGED: &[&str] = &["/band", "/run", "/var/run", "/sys", "/boot"];
/// Never exposed, whatever the rule (band-server checks a mount's canonical host path against
/// the same list).
pub const SECRET: &[&str] = &[
    "/root",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
];
/// A path the sandbox provides itself: a bind may not be at or above it and, unless
/// `bind_inside`, not inside it either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxTree {
    pub path: &'static str,
    /// A host folder may be bound inside it (`/etc/ssl/certs` under `/etc`).
    pub bind_inside: bool,
}

const fn tree(path: &'static str) -> SandboxTree {
    SandboxTree {
        path,
        bind_inside: false,
    }
}

/// The paths the sandbox provides itself. Lint refuses a pattern at or above any of them
/// ([`place`]); band-server checks a mount's canonical host path against the same list: not at
/// or above any, and not inside one unless it is `bind_inside`.
pub const SANDBOX_TREES: &[SandboxTree] = &[
    tree("/band"),
    tree("/skill"),
    tree("/workspace"),
    tree("/tmp"),
    tree("/proc"),
    tree("/dev"),
    tree("/sys"),
    tree("/run"),
    tree("/usr"),
    tree("/bin"),
    tree("/sbin"),
    tree("/lib"),
    tree("/lib64"),
    SandboxTree {
        path: "/etc",
        bind_inside: true,
    },
    tree("/var/run"),
    tree("/boot"),
];

fn under(p: &Path, roots: &[&'static str]) -> Option<&'static str> {
    roots.iter().copied().find(|r| p.starts_with(r))
}

/// Where the absolute `pattern` of `allow.read` (`write: false`) or `allow.write` points.
/// `None` for a relative pattern (the workspace), or one that does not parse (reported as such).
pub fn place(pattern: &str, write: bool) -> Option<Place> {
    let p = FsPattern::parse(pattern).ok()?;
    if !p.is_absolute() {
        return None;
    }
    let prefix = PathBuf::from(p.static_prefix());
    let verb = if write { "write" } else { "read" };
    let refused = |message: String, hint: &str| Place::Refused {
        message,
        hint: hint.to_string(),
    };
    if prefix.starts_with("/tmp") {
        return Some(Place::PrivateTmp);
    }
    if let Some(s) = under(&prefix, SECRET) {
        return Some(refused(
            format!("{s} is never exposed to a run"),
            "copy what the script needs into the workspace and name it with a relative pattern",
        ));
    }
    if let Some(m) = under(&prefix, MANAGED) {
        return Some(refused(
            format!(
                "{} is inside {m}, which the sandbox manages itself",
                prefix.display()
            ),
            "remove the rule",
        ));
    }
    if prefix.starts_with("/workspace") {
        return Some(refused(
            format!(
                "{} names the workspace by its path in the sandbox",
                prefix.display()
            ),
            "write the pattern relative to the workspace (`out/**`, not `/workspace/out/**`)",
        ));
    }
    if prefix.starts_with("/dev") {
        return Some(Place::Shown(
            "the sandbox's own /dev (its standard devices)",
        ));
    }
    if !write {
        if let Some(s) = under(&prefix, SHOWN_SYSTEM) {
            return Some(Place::Shown(s));
        }
        if under(&prefix, PROGRAM_DIRS).is_some() {
            return Some(Place::Shown("the run's programs (declared in allow.cli)"));
        }
        if prefix == Path::new("/usr") {
            return Some(Place::Shown("/usr"));
        }
        if prefix.starts_with("/usr") {
            return Some(Place::NotShown("/usr"));
        }
        if prefix.starts_with("/skill") {
            return Some(Place::Shown("/skill"));
        }
        if prefix.starts_with("/proc") {
            return Some(Place::Shown("the sandbox's own /proc"));
        }
    } else if let Some(s) = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/skill", "/proc"]
        .into_iter()
        .find(|r| prefix.starts_with(r))
    {
        return Some(refused(
            format!("{s} is read-only in the sandbox, so `{pattern}` can never be written"),
            "write to the workspace (a relative pattern) or to /tmp (the run's own)",
        ));
    }
    if let Some(r) = SANDBOX_TREES
        .iter()
        .map(|t| t.path)
        .find(|r| Path::new(r).starts_with(&prefix))
    {
        return Some(refused(
            format!(
                "{} would cover {r}, which the sandbox provides itself",
                prefix.display()
            ),
            &format!("name the host folder the script needs to {verb}, e.g. `/data/**`"),
        ));
    }
    Some(Place::Host(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(p: &str) -> Option<Place> {
        Some(Place::Host(PathBuf::from(p)))
    }

    #[test]
    fn tmp_is_the_runs_own() {
        for p in ["/tmp/**", "/tmp", "/tmp/x.txt", "/tmp/*/out"] {
            assert_eq!(place(p, false), Some(Place::PrivateTmp), "{p}");
            assert_eq!(place(p, true), Some(Place::PrivateTmp), "{p}");
        }
        // Not /tmp: a host folder.
        assert_eq!(place("/tmpdata/**", true), host("/tmpdata"));
        assert_eq!(place("/var/tmp/**", true), host("/var/tmp"));
    }

    #[test]
    fn system_content_is_shown_read_only() {
        assert!(matches!(
            place("/usr/share/dict/**", false),
            Some(Place::Shown(_))
        ));
        assert!(matches!(place("/usr/**", false), Some(Place::Shown(_))));
        assert!(matches!(place("/usr/bin/*", false), Some(Place::Shown(_))));
        assert!(matches!(place("/lib/x", false), Some(Place::Shown(_))));
        assert!(matches!(
            place("/usr/local/lib/**", false),
            Some(Place::NotShown(_))
        ));
        for p in [
            "/usr/share/x/**",
            "/usr/**",
            "/bin/x",
            "/skill/**",
            "/proc/self/x",
        ] {
            assert!(matches!(place(p, true), Some(Place::Refused { .. })), "{p}");
        }
        assert!(matches!(place("/dev/null", true), Some(Place::Shown(_))));
    }

    #[test]
    fn secrets_managed_trees_and_covering_prefixes_are_refused() {
        for p in [
            "/root/**",
            "/root/.ssh/id_rsa",
            "/etc/shadow",
            "/run/user/**",
            "/sys/**",
            "/workspace/out/**",
            "/**",
            "/*.pem",
            "/etc/**",
            "/band/x",
        ] {
            for write in [false, true] {
                assert!(
                    matches!(place(p, write), Some(Place::Refused { .. })),
                    "{p} {write}"
                );
            }
        }
        assert_eq!(place("/etc/ssl/certs/**", false), host("/etc/ssl/certs"));
        assert_eq!(place("/data/input.csv", false), host("/data/input.csv"));
        assert_eq!(place("data/**", false), None);
        assert_eq!(place("~/x", false), None);
    }

    #[test]
    fn etc_is_the_one_tree_a_host_folder_may_be_bound_inside() {
        let inside: Vec<&str> = SANDBOX_TREES
            .iter()
            .filter(|t| t.bind_inside)
            .map(|t| t.path)
            .collect();
        assert_eq!(inside, ["/etc"]);
    }
}
