//! A run that failed to write into its workspace where its band does not let it: which paths,
//! and the `allow.write` rule that would. The copy's folders are the run's only where
//! `allow.write` opens them; elsewhere a write is refused by the filesystem (`EACCES`), and the
//! script says so in its own words (`PermissionError: [Errno 13] Permission denied: 'beta'`,
//! `mkdir: cannot create directory 'beta': Permission denied`). Only the script's stderr is read,
//! and only its lines that say "permission denied"; nothing of the workspace is listed, and the
//! only lookup is the type of a name the script gave.

use std::collections::BTreeSet;

use rustix::fs::FileType;
use serde::Serialize;

use super::unadmitted::{as_workspace_path, exact_rule, has_extension};
use super::workspace::{WorkspaceRoot, kind_of};
use crate::policy::CompiledPolicy;

/// At most this many paths are reported, of at most this many lines read.
const MAX_SHOWN: usize = 3;
const MAX_LINES: usize = 200;

/// A workspace path the script could not write, which the band's `allow.write` does not admit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotWritable {
    /// Workspace-relative.
    pub path: String,
    /// The `allow.write` rule that admits it: `beta/**` for a folder (or a name without an
    /// extension the workspace lacks), the file itself for a file (`./notes.md` at the root).
    pub rule: String,
}

/// The names a line of stderr says it could not write: its quoted strings (`'beta'`, `"x"`,
/// `` `y` ``, `‘z’`), else the field before `: Permission denied` (`bash: out.txt: Permission
/// denied`, dash's `cannot create out.txt: Permission denied`).
fn denied_names(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('`', '`'), ('‘', '’')] {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            out.push(&after[..j]);
            rest = &after[j + close.len_utf8()..];
        }
    }
    // Else the field before a `: Permission denied` that ends the line (node's `EACCES:
    // permission denied, mkdir 'x'` names its path quoted).
    let lower = line.trim_end().to_ascii_lowercase();
    if let Some(at) = lower
        .strip_suffix(": permission denied")
        .map(str::len)
        .filter(|_| out.is_empty())
    {
        let field = line[..at].rsplit(": ").next().unwrap_or("");
        let field = field.strip_prefix("cannot create ").unwrap_or(field);
        out.push(field.trim());
    }
    out
}

/// Whether a line of stderr says a permission was denied (`EACCES`).
fn says_permission_denied(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.contains("permission denied") || lower.contains("eacces") || lower.contains("errno 13")
}

/// Of the paths a failed run's `stderr` says it was denied, those in the workspace that the
/// band's `allow.write` does not admit, each with the rule that would: at most [`MAX_SHOWN`].
/// A path `allow.write` admits was refused for another reason, and is not named.
pub(crate) fn not_writable(
    root: &WorkspaceRoot,
    policy: &CompiledPolicy,
    stderr: &str,
) -> Vec<NotWritable> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in stderr.lines().take(MAX_LINES) {
        if !says_permission_denied(line) {
            continue;
        }
        for path in denied_names(line).into_iter().filter_map(as_workspace_path) {
            if out.len() == MAX_SHOWN {
                return out;
            }
            if !seen.insert(path.clone()) || policy.write.check(&path).is_allowed() {
                continue;
            }
            let folder = match kind_of(root, &path) {
                Some(FileType::Directory) => true,
                Some(_) => false,
                None => !has_extension(&path),
            };
            out.push(NotWritable {
                rule: exact_rule(&path, folder),
                path,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_names_a_permission_error_gives() {
        for (line, want) in [
            (
                "PermissionError: [Errno 13] Permission denied: 'beta'",
                vec!["beta"],
            ),
            (
                "mkdir: cannot create directory ‘beta’: Permission denied",
                vec!["beta"],
            ),
            (
                "Error: EACCES: permission denied, mkdir '/workspace/beta/x'",
                vec!["/workspace/beta/x"],
            ),
            ("bash: out.txt: Permission denied", vec!["out.txt"]),
            (
                "sh: 1: cannot create out.txt: Permission denied",
                vec!["out.txt"],
            ),
        ] {
            assert!(says_permission_denied(line), "{line}");
            assert_eq!(denied_names(line), want, "{line}");
        }
        assert!(!says_permission_denied("FileNotFoundError: 'beta'"));
    }

    #[test]
    fn only_paths_the_band_does_not_let_the_run_write_with_the_rule_that_would() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        fs_err::create_dir_all(w.join("alpha")).expect("mkdir");
        fs_err::create_dir_all(w.join("gamma")).expect("mkdir");
        fs_err::write(w.join("notes"), "x").expect("write");
        let root = WorkspaceRoot::open(w, true, true).expect("open");
        let mut p = crate::policy::Policy::default();
        p.allow.write = vec!["alpha/**".into()];
        let policy = CompiledPolicy::compile(&p).expect("policy");
        let stderr = "Traceback (most recent call last):\n\
             PermissionError: [Errno 13] Permission denied: 'beta'\n\
             cp: cannot create regular file 'alpha/x': Permission denied\n\
             touch: cannot touch 'report.md': Permission denied\n\
             bash: notes: Permission denied\n\
             open '/etc/shadow': permission denied\n\
             mkdir: cannot create directory 'gamma': Permission denied\n";
        let got = not_writable(&root, &policy, stderr);
        assert_eq!(
            got,
            vec![
                NotWritable {
                    path: "beta".into(),
                    rule: "beta/**".into()
                },
                NotWritable {
                    path: "report.md".into(),
                    rule: "./report.md".into()
                },
                NotWritable {
                    path: "notes".into(),
                    rule: "./notes".into()
                },
            ]
        );
        assert_eq!(
            not_writable(&root, &policy, "no such file: 'beta'\n"),
            vec![]
        );
    }
}
