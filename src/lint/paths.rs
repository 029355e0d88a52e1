//! Absolute `read`/`write` patterns, judged by [`crate::policy::place`] exactly as band-server
//! judges them: a rule the run would refuse is an error here (P010), a read of a part of `/usr`
//! the sandbox does not show a warning (P011), and an absolute deny inside a bound host path
//! (which a whole-path bind cannot enforce) an error (P010).

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
