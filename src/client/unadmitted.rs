//! A run that looked for a workspace file its band does not admit: which files, and the
//! `allow.read` rule that would admit each (issue 38, item 7). Only names the script itself gave
//! (its output, its input's strings) are looked up, and only their type is read: nothing of the
//! workspace is listed, and no contents are read.
//!
//! A failed run looks up every word of its stderr. A run that ended ok looks up only words that
//! read as paths (a `/` in them, or a name with an extension): a script that tested for a folder
//! the band hid (`[ -d libs ]`) and said "no libs/ directory" ended ok, with another result than
//! it gives on the host, and nothing said why.

use std::collections::BTreeSet;

use rustix::fs::FileType;
use serde::Serialize;

use super::workspace::{WorkspaceRoot, kind_of};
use crate::policy::CompiledPolicy;
use crate::proto::FileEntry;

/// At most this many names are looked up, and this many reported.
const MAX_LOOKUPS: usize = 200;
const MAX_SHOWN: usize = 3;

/// A workspace file or folder the script named, which exists but was not in the run's copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotAdmitted {
    /// Workspace-relative.
    pub path: String,
    /// The `allow.read` rule that admits exactly it (`./refs.bib`, `data/in.csv`, `proj/**`).
    pub rule: String,
}

/// Workspace-relative form of a name a script gave: `refs.bib`, `./data/x.csv`,
/// `/workspace/proj`. `None` for anything else: absolute paths outside the workspace, `..`,
/// options, URLs, glob characters, empty names.
pub(super) fn as_workspace_path(word: &str) -> Option<String> {
    let word = word.strip_prefix("/workspace/").unwrap_or(word);
    let word = word
        .strip_prefix("./")
        .unwrap_or(word)
        .trim_end_matches('/');
    if word.is_empty()
        || word.len() > 1024
        || word.starts_with(['/', '-'])
        || word.contains("://")
        || word.contains(['*', '?', '[', ']', '{', '}', '\\'])
        || word
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return None;
    }
    Some(word.to_string())
}

/// The most of a run's stdout and of its stderr read for names.
const MAX_SCANNED: usize = 64 << 10;

/// Which words of a run's output are looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Words {
    /// Every word of stderr, and the path-like words of stdout: the run failed.
    Failed,
    /// Only path-like words (a `/` in them, or `name.ext`), of both: the run ended ok, so only a
    /// name that reads as a path is worth a note.
    PathLike,
}

/// A word that reads as a path: a `/` in it (`libs/`, `data/in.csv`), or a name with an
/// extension (`refs.bib`), not a number (`3.14`) or a sentence's end.
fn path_like(word: &str) -> bool {
    word.contains('/') || has_extension(word)
}

/// A name with an extension (`refs.bib`, `out/x.tar`), not a number (`3.14`), a sentence's end
/// or a hidden name alone (`.env`).
pub(super) fn has_extension(name: &str) -> bool {
    let last = name.rsplit('/').next().unwrap_or(name);
    last.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && !ext.is_empty()
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && !ext.chars().all(|c| c.is_ascii_digit())
    })
}

/// The words of `text` (its first [`MAX_SCANNED`] bytes), split at whitespace and quotes,
/// brackets, `:`, `,` and `;`, a final `.` dropped.
fn words_of(text: &str) -> impl Iterator<Item = &str> {
    let mut end = text.len().min(MAX_SCANNED);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end]
        .split(|c: char| c.is_whitespace() || "'\"`()<>[]{},;:".contains(c))
        .map(|w| w.strip_suffix('.').unwrap_or(w))
}

/// The names a script may have looked for: its input's strings, then words of its stderr and
/// stdout as `which` says. In order of appearance, each once, at most [`MAX_LOOKUPS`].
pub(crate) fn named_paths(
    stderr: &str,
    stdout: &str,
    input: &serde_json::Value,
    which: Words,
) -> Vec<String> {
    fn strings<'v>(v: &'v serde_json::Value, out: &mut Vec<&'v str>) {
        match v {
            serde_json::Value::String(s) => out.push(s),
            serde_json::Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
            serde_json::Value::Object(o) => o.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut words: Vec<&str> = Vec::new();
    strings(input, &mut words);
    match which {
        Words::Failed => words.extend(words_of(stderr)),
        Words::PathLike => words.extend(words_of(stderr).filter(|w| path_like(w))),
    }
    words.extend(words_of(stdout).filter(|w| path_like(w)));
    let mut seen = BTreeSet::new();
    words
        .into_iter()
        .filter_map(as_workspace_path)
        .filter(|p| seen.insert(p.clone()))
        .take(MAX_LOOKUPS)
        .collect()
}

/// The exact rule for `path` (`allow.read`, `allow.write`): itself (`./name` at the root, as a
/// bare name would match at any depth), and `/**` after a folder.
pub(super) fn exact_rule(path: &str, folder: bool) -> String {
    match (folder, path.contains('/')) {
        (true, _) => format!("{path}/**"),
        (false, true) => path.to_string(),
        (false, false) => format!("./{path}"),
    }
}

/// Of the names a script gave, those that exist in the workspace but were not copied in (the
/// band does not admit them) and that the run did not write, each with the rule that would: at
/// most [`MAX_SHOWN`]. A folder the run made (`written_folders`, or one on the way to them) or
/// one `allow.write` opens (the run had it) is not such a name.
pub(crate) fn not_admitted(
    root: &WorkspaceRoot,
    policy: &CompiledPolicy,
    copied: &[FileEntry],
    written: &[FileEntry],
    written_folders: &[String],
    names: &[String],
) -> Vec<NotAdmitted> {
    let copied: BTreeSet<&str> = copied.iter().map(|f| f.path.as_str()).collect();
    let mut out = Vec::new();
    for path in names {
        if out.len() == MAX_SHOWN {
            break;
        }
        if copied.contains(path.as_str())
            || written.iter().any(|w| w.path == *path)
            || policy.read.check(path).is_allowed()
        {
            continue;
        }
        let inside = |p: &str| {
            p.strip_prefix(path.as_str())
                .is_some_and(|r| r.starts_with('/'))
        };
        let folder = match kind_of(root, path) {
            Some(FileType::RegularFile) => false,
            // A folder with some file admitted was (in part) copied, and one the run wrote into
            // may be the run's own (it is looked up after the write-back): not this case.
            Some(FileType::Directory)
                if !copied.iter().any(|c| inside(c))
                    && !written.iter().any(|w| inside(&w.path))
                    && !written_folders.iter().any(|d| d == path || inside(d))
                    && !policy.write.check_folder(path).is_allowed() =>
            {
                true
            }
            _ => continue,
        };
        out.push(NotAdmitted {
            rule: exact_rule(path, folder),
            path: path.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_come_from_stderr_words_and_input_strings() {
        let stderr = "Error reading file: [Errno 2] No such file or directory: 'refs.bib'\n\
                      Error: File not found: data/in.csv.\n\
                      Error: /workspace/proj is missing; see https://x.test/a and /etc/hosts, ../up\n";
        let input = serde_json::json!({"args": ["--out=x", "out.bib"], "n": 3, "f": "refs.bib"});
        let got = named_paths(stderr, "", &input, Words::Failed);
        assert!(
            got.starts_with(&["out.bib".to_string(), "refs.bib".to_string()]),
            "{got:?}"
        );
        for want in ["data/in.csv", "proj", "Error", "File"] {
            assert!(got.contains(&want.to_string()), "{want} in {got:?}");
        }
        for never in ["/etc/hosts", "../up", "https://x.test/a", "--out=x"] {
            assert!(!got.iter().any(|g| g == never), "{never} in {got:?}");
        }
    }

    #[test]
    fn only_existing_names_the_band_did_not_admit_with_the_exact_rule() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        fs_err::create_dir_all(w.join("proj/src")).expect("mkdir");
        fs_err::write(w.join("refs.bib"), "secret contents").expect("write");
        fs_err::write(w.join("proj/src/a.rs"), "x").expect("write");
        fs_err::write(w.join("data.csv"), "x").expect("write");
        fs_err::create_dir_all(w.join("d")).expect("mkdir");
        fs_err::write(w.join("d/admitted.txt"), "x").expect("write");
        fs_err::os::unix::fs::symlink("/etc/hosts", w.join("link")).expect("symlink");
        let root = WorkspaceRoot::open(w, true, true).expect("open");
        let mut p = crate::policy::Policy::default();
        p.allow.read = vec!["data.csv".into(), "d/**".into()];
        let policy = CompiledPolicy::compile(&p).expect("policy");
        let copied = [FileEntry {
            path: "d/admitted.txt".into(),
            mode: 0o644,
            data: String::new(),
        }];
        let names: Vec<String> = [
            "Error", "refs.bib", "link", "data.csv", "d", "proj", "missing",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got = not_admitted(&root, &policy, &copied, &[], &[], &names);
        assert_eq!(
            got,
            vec![
                NotAdmitted {
                    path: "refs.bib".into(),
                    rule: "./refs.bib".into()
                },
                NotAdmitted {
                    path: "proj".into(),
                    rule: "proj/**".into()
                },
            ]
        );
    }

    #[test]
    fn an_ok_run_looks_up_only_words_that_read_as_paths_of_both_streams() {
        let stdout = "Checked 3 files.\nlibs: skipped (no libs/ directory found)\nSee notes.md, v1.2 and 3.14\n";
        let stderr = "INFO data loaded; wrote out/report.txt\n";
        let input = serde_json::json!({"mode": "fast"});
        let got = named_paths(stderr, stdout, &input, Words::PathLike);
        assert_eq!(got, ["fast", "out/report.txt", "libs", "notes.md"]);
        // A failed run takes every word of stderr, and still only the path-like of stdout.
        let got = named_paths(stderr, stdout, &input, Words::Failed);
        assert!(got.contains(&"data".to_string()), "{got:?}");
        assert!(!got.contains(&"Checked".to_string()), "{got:?}");
        // Past the bound nothing is read.
        let long = format!("{}tail/x.txt", "a ".repeat(MAX_SCANNED));
        assert!(!named_paths("", &long, &input, Words::PathLike).contains(&"tail/x.txt".into()));
    }

    #[test]
    fn a_file_the_run_wrote_is_not_said_to_be_left_out() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        fs_err::create_dir_all(w.join("out")).expect("mkdir");
        fs_err::write(w.join("out/report.txt"), "x").expect("write");
        fs_err::create_dir_all(w.join("libs")).expect("mkdir");
        let root = WorkspaceRoot::open(w, true, true).expect("open");
        let policy = CompiledPolicy::compile(&crate::policy::Policy::default()).expect("policy");
        let written = [FileEntry {
            path: "out/report.txt".into(),
            mode: 0o644,
            data: String::new(),
        }];
        // `out` itself, the folder the run wrote into, is not said to be left out either.
        let names = [
            "out/report.txt".to_string(),
            "out".to_string(),
            "libs".to_string(),
        ];
        let got = not_admitted(&root, &policy, &[], &written, &[], &names);
        assert_eq!(
            got,
            [NotAdmitted {
                path: "libs".into(),
                rule: "libs/**".into()
            }]
        );
    }

    /// A folder the run made and left empty, one on the way to it, and one `allow.write` opens
    /// (the run had it, empty or not) are not said to be left out (sixth wild trial: gcc_init's
    /// `.GCC/branches`, qa-test-planner's `test-cases/`).
    #[test]
    fn folders_the_run_made_or_could_write_are_not_said_to_be_left_out() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        for d in [".GCC/branches", "test-cases", "libs"] {
            fs_err::create_dir_all(w.join(d)).expect("mkdir");
        }
        let root = WorkspaceRoot::open(w, true, true).expect("open");
        let mut p = crate::policy::Policy::default();
        p.allow.write = vec!["test-cases/**".into(), ".GCC/**".into()];
        let policy = CompiledPolicy::compile(&p).expect("policy");
        let names = [".GCC/branches", ".GCC", "test-cases", "libs"].map(String::from);
        let made = [".GCC/branches".to_string()];
        let got = not_admitted(&root, &policy, &[], &[], &made, &names);
        assert_eq!(
            got,
            [NotAdmitted {
                path: "libs".into(),
                rule: "libs/**".into()
            }]
        );
        // Without the write rules, the folder the run made is still its own.
        let none = CompiledPolicy::compile(&crate::policy::Policy::default()).expect("policy");
        let got: Vec<String> = not_admitted(&root, &none, &[], &[], &made, &names)
            .into_iter()
            .map(|n| n.path)
            .collect();
        assert_eq!(got, ["test-cases", "libs"]);
    }
}
