//! Absolute `read`/`write` patterns, judged by [`crate::policy::place`] exactly as band-server
//! judges them: a rule the run would refuse is an error here (P010), a read of a part of `/usr`
//! the sandbox does not show a warning (P011), and an absolute deny inside a bound host path
//! (which a whole-path bind cannot enforce) an error (P010). Relative rules that reach into a
//! folder a run never gets (`.git`, `target`, unless named from the root) warn (P012).

use crate::diag::{Code, Diagnostic};
use crate::manifest::Band;
use crate::manifest::locate::Step;
use crate::policy::Category;
use crate::policy::fs::FsPattern;
use crate::policy::place::{Place, place};

/// The absolute-path diagnostics of one band file's own rules.
pub fn check_absolute_paths(band: &Band) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut bound: Vec<(String, std::path::PathBuf)> = Vec::new();
    for (column, rules) in [("allow", &band.allow), ("insist", &band.insist)] {
        for (cat, key, write) in [
            (Category::Read, "read", false),
            (Category::Write, "write", true),
        ] {
            for (i, p) in rules.get(cat).iter().enumerate() {
                let loc = band.locate(&[Step::Key(column), Step::Key(key), Step::Index(i)]);
                match place(p, write) {
                    Some(Place::Refused { message, hint }) => out.push(
                        Diagnostic::new(
                            Code::PathRefused,
                            &band.path,
                            loc,
                            format!("{column}.{key} `{p}`: {message}; the run is refused"),
                        )
                        .with_hint(hint),
                    ),
                    Some(Place::NotShown(tree)) => out.push(
                        Diagnostic::new(
                            Code::PathNotShown,
                            &band.path,
                            loc,
                            format!(
                                "{column}.{key} `{p}`: the sandbox's {tree} holds only /usr/lib*, /usr/share, /usr/libexec and the declared programs, so this rule gives nothing"
                            ),
                        )
                        .with_hint("declare the program in allow.cli, or copy the files into the workspace"),
                    ),
                    Some(Place::Host(prefix)) => bound.push((p.clone(), prefix)),
                    Some(Place::PrivateTmp | Place::Shown(_)) | None => {}
                }
            }
        }
    }
    for (cat, key) in [(Category::Read, "read"), (Category::Write, "write")] {
        for (i, d) in band.deny.get(cat).iter().enumerate() {
            let Some(dp) = FsPattern::parse(d)
                .ok()
                .filter(FsPattern::is_absolute)
                .map(|p| std::path::PathBuf::from(p.static_prefix()))
            else {
                continue;
            };
            if let Some((allow, _)) = bound
                .iter()
                .find(|(_, m)| m.starts_with(&dp) || dp.starts_with(m))
            {
                out.push(
                    Diagnostic::new(
                        Code::PathRefused,
                        &band.path,
                        band.locate(&[Step::Key("deny"), Step::Key(key), Step::Index(i)]),
                        format!(
                            "deny.{key} `{d}` cannot be enforced inside the host path `{allow}` binds whole; the run is refused"
                        ),
                    )
                    .with_hint("narrow the absolute allow pattern so it does not include denied paths"),
                );
            }
        }
    }
    out
}

/// Folders the workspace copy leaves out unless a rule names them from the root
/// (`client::workspace::skipped_dir`): a repository's history, a build's output.
const NEVER_COPIED: [&str; 2] = [".git", "target"];

/// Why the relative rule `p` gives nothing from `.git` or `target`, if it reaches there: the
/// folder comes after a wildcard or is a bare name (only a pattern naming it from the root, its
/// literal prefix, copies it), or `write` names `.git` (never written back).
pub(crate) fn never_copied(p: &str, write: bool) -> Option<(String, String)> {
    let pat = FsPattern::parse(p).ok().filter(|p| !p.is_absolute())?;
    let comps: Vec<&str> = p
        .trim_start_matches("./")
        .split('/')
        .filter(|c| !c.is_empty())
        .collect();
    let literal = if pat.is_anchored() {
        pat.static_prefix()
            .split('/')
            .filter(|c| !c.is_empty())
            .count()
    } else {
        0
    };
    let (i, dir) = comps
        .iter()
        .enumerate()
        .find(|(_, c)| NEVER_COPIED.contains(c))?;
    if i < literal {
        return (write && *dir == ".git").then(|| {
            (
                "nothing under `.git` is written back (a repository is read-only to a script)"
                    .into(),
                "remove the rule: what a script writes into `.git` stays in its sandbox".into(),
            )
        });
    }
    Some((
        format!(
            "`{dir}` is copied into the workspace only when a rule names it from the root (`{dir}/**`, `sub/{dir}/**`); through a wildcard or a bare name this rule gives nothing from it"
        ),
        format!(
            "`.git` and `target` are left out of every run's workspace (history and build output are rarely a script's data, and large); name the folder from the workspace root to copy it: allow.read \"{dir}/**\""
        ),
    ))
}

/// P012 for one band file's own relative read and write rules.
pub fn check_never_copied(band: &Band) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (column, rules) in [("allow", &band.allow), ("insist", &band.insist)] {
        for (cat, key, write) in [
            (Category::Read, "read", false),
            (Category::Write, "write", true),
        ] {
            for (i, p) in rules.get(cat).iter().enumerate() {
                if let Some((why, hint)) = never_copied(p, write) {
                    let loc = band.locate(&[Step::Key(column), Step::Key(key), Step::Index(i)]);
                    out.push(
                        Diagnostic::new(
                            Code::NeverCopied,
                            &band.path,
                            loc,
                            format!("{column}.{key} `{p}`: {why}"),
                        )
                        .with_hint(hint),
                    );
                }
            }
        }
    }
    out
}

/// Whether `p` copies the repository's history: a relative rule naming `.git` from the
/// workspace root (`.git/**`, `./.git/HEAD`).
fn names_git_from_root(p: &str) -> bool {
    never_copied(p, false).is_none()
        && FsPattern::parse(p).is_ok_and(|f| !f.is_absolute())
        && p.trim_start_matches("./").split('/').next() == Some(".git")
}

/// Whether `p` admits the whole workspace (`**`, `./**`, `**/*`).
fn admits_whole_tree(p: &str) -> bool {
    matches!(p.trim_start_matches("./"), "**" | "**/*")
}

/// P014 for the band `r` resolves to: its reads copy the repository's history (`.git/**`) but
/// not the whole work tree, and it allows `git`. The copy holds only what the read rules admit,
/// so git in the run sees every tracked file they leave out as deleted (`git status`, `git diff`,
/// `git stash`). Located at the `.git` rule when the script's own band file has it.
pub fn check_git_work_tree(r: &crate::skill::Resolved) -> Vec<Diagnostic> {
    let reads = &r.policy.allow.read;
    let Some(rule) = reads.iter().find(|p| names_git_from_root(p)) else {
        return Vec::new();
    };
    if reads.iter().any(|p| admits_whole_tree(p)) {
        return Vec::new();
    }
    let git = crate::policy::cli::CliMatcher::new(&r.policy.allow.cli, &r.policy.deny.cli)
        .is_ok_and(|m| m.commands().contains("git"));
    if !git {
        return Vec::new();
    }
    let at = |i| {
        r.band
            .locate(&[Step::Key("allow"), Step::Key("read"), Step::Index(i)])
    };
    let own = r.band.allow.read.iter().position(|p| p == rule);
    let loc = own.map_or(crate::diag::Loc::FILE, at);
    vec![
        Diagnostic::new(
            Code::GitWithoutWorkTree,
            &r.band.path,
            loc,
            format!(
                "allow.read `{rule}` copies the repository's history, but no rule admits its whole work tree: git in the run sees every tracked file the read rules leave out as deleted"
            ),
        )
        .with_hint(
            "if the script asks git about the work tree (status, diff, stash), admit it too: allow.read \"**\"; for history alone (log, show, blame of a commit) this warning can be ignored",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::never_copied;

    #[test]
    fn rules_that_reach_git_or_target_only_through_a_wildcard_give_nothing_from_them() {
        for (p, write, warned) in [
            (".git/**", false, false),
            ("./.git/HEAD", false, false),
            ("target/**", true, false),
            ("sub/target/*.log", false, false),
            ("**", false, false),
            ("data/**", false, false),
            (".gitignore", false, false),
            ("**/.git/**", false, true),
            ("*/target/**", false, true),
            ("target", false, true),
            (".git/**", true, true),
            ("/etc/.git/x", false, false),
        ] {
            assert_eq!(
                never_copied(p, write).is_some(),
                warned,
                "{p} (write: {write})"
            );
        }
        assert_eq!(
            never_copied("**/.git/**", false).map(|w| w.0).as_deref(),
            Some(
                "`.git` is copied into the workspace only when a rule names it from the root (`.git/**`, `sub/.git/**`); through a wildcard or a bare name this rule gives nothing from it"
            )
        );
    }
}
