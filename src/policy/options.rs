//! Option models: how some commands spell their options, so that a `deny.cli` pattern matches
//! every equivalent spelling of the argv it denies (issue 13, item 10).
//!
//! A model is data: for each option, its canonical name, its short letters (case aliases such as
//! `rm -r`/`-R` are two letters of one option), its long names, and whether it takes a value.
//! [`normalize`] parses an argv the way getopt does: short clusters (`-rf`), a value attached to
//! a short option (`-XDELETE`, `-i.bak`) or following it, long options abbreviated to any unique
//! prefix (`--rec`), `--opt=value` ≡ `--opt value`, options after operands, and `--` ending the
//! options. The result is the canonical flags (with their values) and the operands in order.
//!
//! Only deny matching uses it (see [`super::cli`]): normalising can only make a deny pattern match
//! more argvs. Allow patterns are matched as written.
//!
//! Options a model does not list are kept as written and take no value, which may misread an
//! unlisted option's value as an operand: the models list every value-taking option of the
//! commands they cover (GNU coreutils, GNU sed, git, curl, wget).

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// No value: `-f`, `--force`.
    Nothing,
    /// A value, attached or the next argument: `-X GET`, `-XGET`, `--request GET`, `--request=GET`.
    Value,
    /// An optional value, attached only: `-i.bak`, `--in-place=.bak`; `-i` alone takes none.
    Attached,
}

/// One option of a command.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// How [`normalize`] spells it: its first short letter (`-r`) or its first long name.
    pub canonical: &'static str,
    /// Short letters, each one spelling of this option.
    pub short: &'static str,
    /// Long names without `--`.
    pub long: &'static [&'static str],
    pub takes: Takes,
}

const fn opt(
    canonical: &'static str,
    short: &'static str,
    long: &'static [&'static str],
    takes: Takes,
) -> Opt {
    Opt {
        canonical,
        short,
        long,
        takes,
    }
}

use Takes::{Attached, Nothing, Value};

/// The options of one command, and of its subcommands (for `git push`).
#[derive(Debug, Clone, Copy)]
pub struct Model {
    pub command: &'static str,
    pub options: &'static [Opt],
    /// Subcommand name and its options; the first operand selects one.
    pub subcommands: &'static [(&'static str, &'static [Opt])],
}

const RM: &[Opt] = &[
    opt("-r", "rR", &["recursive"], Nothing),
    opt("-f", "f", &["force"], Nothing),
    opt("-i", "i", &[], Nothing),
    opt("-I", "I", &[], Nothing),
    opt("--interactive", "", &["interactive"], Attached),
    opt("-d", "d", &["dir"], Nothing),
    opt("-v", "v", &["verbose"], Nothing),
    opt("--one-file-system", "", &["one-file-system"], Nothing),
    opt("--no-preserve-root", "", &["no-preserve-root"], Nothing),
    opt("--preserve-root", "", &["preserve-root"], Attached),
];

const SED: &[Opt] = &[
    opt("-i", "i", &["in-place"], Attached),
    opt("-e", "e", &["expression"], Value),
    opt("-f", "f", &["file"], Value),
    opt("-n", "n", &["quiet", "silent"], Nothing),
    opt("-E", "Er", &["regexp-extended"], Nothing),
    opt("-s", "s", &["separate"], Nothing),
    opt("-z", "z", &["null-data"], Nothing),
    opt("-l", "l", &["line-length"], Value),
    opt("-u", "u", &["unbuffered"], Nothing),
    opt("-b", "b", &["binary"], Nothing),
    opt("--posix", "", &["posix"], Nothing),
    opt("--debug", "", &["debug"], Nothing),
    opt("--sandbox", "", &["sandbox"], Nothing),
    opt("--follow-symlinks", "", &["follow-symlinks"], Nothing),
];

const CHMOD: &[Opt] = &[
    opt("-R", "R", &["recursive"], Nothing),
    opt("-v", "v", &["verbose"], Nothing),
    opt("-c", "c", &["changes"], Nothing),
    opt("-f", "f", &["silent", "quiet"], Nothing),
    opt("--reference", "", &["reference"], Value),
    opt("--preserve-root", "", &["preserve-root"], Nothing),
    opt("--no-preserve-root", "", &["no-preserve-root"], Nothing),
];

const CHOWN: &[Opt] = &[
    opt("-R", "R", &["recursive"], Nothing),
    opt("-v", "v", &["verbose"], Nothing),
    opt("-c", "c", &["changes"], Nothing),
    opt("-f", "f", &["silent", "quiet"], Nothing),
    opt("-h", "h", &["no-dereference"], Nothing),
    opt("--dereference", "", &["dereference"], Nothing),
    opt("-H", "H", &[], Nothing),
    opt("-L", "L", &[], Nothing),
    opt("-P", "P", &[], Nothing),
    opt("--reference", "", &["reference"], Value),
    opt("--from", "", &["from"], Value),
    opt("--preserve-root", "", &["preserve-root"], Nothing),
    opt("--no-preserve-root", "", &["no-preserve-root"], Nothing),
];

const CP: &[Opt] = &[
    opt("-f", "f", &["force"], Nothing),
    opt("-r", "rR", &["recursive"], Nothing),
    opt("-a", "a", &["archive"], Nothing),
    opt("-i", "i", &["interactive"], Nothing),
    opt("-n", "n", &["no-clobber"], Nothing),
    opt("-v", "v", &["verbose"], Nothing),
    opt("-t", "t", &["target-directory"], Value),
    opt("-T", "T", &["no-target-directory"], Nothing),
    opt("-S", "S", &["suffix"], Value),
    opt("-l", "l", &["link"], Nothing),
    opt("-s", "s", &["symbolic-link"], Nothing),
    opt("-p", "p", &[], Nothing),
    opt("--preserve", "", &["preserve"], Attached),
    opt("--no-preserve", "", &["no-preserve"], Value),
    opt("--sparse", "", &["sparse"], Value),
    opt("--reflink", "", &["reflink"], Attached),
    opt("-x", "x", &["one-file-system"], Nothing),
    opt("-d", "d", &[], Nothing),
    opt("-b", "b", &[], Nothing),
    opt("--backup", "", &["backup"], Attached),
    opt("-u", "u", &[], Nothing),
    opt("--update", "", &["update"], Attached),
    opt("-L", "L", &["dereference"], Nothing),
    opt("-P", "P", &["no-dereference"], Nothing),
    opt("-H", "H", &[], Nothing),
    opt("--remove-destination", "", &["remove-destination"], Nothing),
];

const MV: &[Opt] = &[
    opt("-f", "f", &["force"], Nothing),
    opt("-i", "i", &["interactive"], Nothing),
    opt("-n", "n", &["no-clobber"], Nothing),
    opt("-v", "v", &["verbose"], Nothing),
    opt("-t", "t", &["target-directory"], Value),
    opt("-T", "T", &["no-target-directory"], Nothing),
    opt("-S", "S", &["suffix"], Value),
    opt("-b", "b", &[], Nothing),
    opt("--backup", "", &["backup"], Attached),
    opt("-u", "u", &[], Nothing),
    opt("--update", "", &["update"], Attached),
];

const GIT: &[Opt] = &[
    opt("-C", "C", &[], Value),
    opt("-c", "c", &[], Value),
    opt("--config-env", "", &["config-env"], Value),
    opt("--git-dir", "", &["git-dir"], Value),
    opt("--work-tree", "", &["work-tree"], Value),
    opt("--namespace", "", &["namespace"], Value),
    opt("--exec-path", "", &["exec-path"], Attached),
    opt("-p", "p", &["paginate"], Nothing),
    opt("-P", "P", &["no-pager"], Nothing),
    opt("--bare", "", &["bare"], Nothing),
    opt("--no-replace-objects", "", &["no-replace-objects"], Nothing),
    opt("--literal-pathspecs", "", &["literal-pathspecs"], Nothing),
];

const GIT_PUSH: &[Opt] = &[
    opt("-f", "f", &["force"], Nothing),
    opt("--force-with-lease", "", &["force-with-lease"], Attached),
    opt("--force-if-includes", "", &["force-if-includes"], Nothing),
    opt("-n", "n", &["dry-run"], Nothing),
    opt("-u", "u", &["set-upstream"], Nothing),
    opt("-v", "v", &["verbose"], Nothing),
    opt("-q", "q", &["quiet"], Nothing),
    opt("-d", "d", &["delete"], Nothing),
    opt("--all", "", &["all", "branches"], Nothing),
    opt("--mirror", "", &["mirror"], Nothing),
    opt("--tags", "", &["tags"], Nothing),
    opt("--follow-tags", "", &["follow-tags"], Nothing),
    opt("--prune", "", &["prune"], Nothing),
    opt("--atomic", "", &["atomic"], Nothing),
    opt("--no-verify", "", &["no-verify"], Nothing),
    opt("--repo", "", &["repo"], Value),
    opt("-o", "o", &["push-option"], Value),
    opt("--receive-pack", "", &["receive-pack", "exec"], Value),
    opt("--signed", "", &["signed"], Attached),
    opt("--recurse-submodules", "", &["recurse-submodules"], Value),
    opt("-4", "4", &["ipv4"], Nothing),
    opt("-6", "6", &["ipv6"], Nothing),
];

const CURL: &[Opt] = &[
    opt("-X", "X", &["request"], Value),
    opt("-d", "d", &["data"], Value),
    opt("--data-binary", "", &["data-binary"], Value),
    opt("--data-raw", "", &["data-raw"], Value),
    opt("--data-urlencode", "", &["data-urlencode"], Value),
    opt("--data-ascii", "", &["data-ascii"], Value),
    opt("--json", "", &["json"], Value),
    opt("-F", "F", &["form"], Value),
    opt("-T", "T", &["upload-file"], Value),
    opt("-o", "o", &["output"], Value),
    opt("-O", "O", &["remote-name"], Nothing),
    opt("-H", "H", &["header"], Value),
    opt("-u", "u", &["user"], Value),
    opt("-K", "K", &["config"], Value),
    opt("-x", "x", &["proxy"], Value),
    opt("-A", "A", &["user-agent"], Value),
    opt("-e", "e", &["referer"], Value),
    opt("-b", "b", &["cookie"], Value),
    opt("-c", "c", &["cookie-jar"], Value),
    opt("-m", "m", &["max-time"], Value),
    opt("-w", "w", &["write-out"], Value),
    opt("-r", "r", &["range"], Value),
    opt("-E", "E", &["cert"], Value),
    opt("-D", "D", &["dump-header"], Value),
    opt("-z", "z", &["time-cond"], Value),
    opt("-Y", "Y", &["speed-limit"], Value),
    opt("-y", "y", &["speed-time"], Value),
    opt("-C", "C", &["continue-at"], Value),
    opt("-U", "U", &["proxy-user"], Value),
    opt("-Q", "Q", &["quote"], Value),
    opt("-t", "t", &["telnet-option"], Value),
    opt("--url", "", &["url"], Value),
    opt("--connect-to", "", &["connect-to"], Value),
    opt("--resolve", "", &["resolve"], Value),
    opt("-k", "k", &["insecure"], Nothing),
    opt("-L", "L", &["location"], Nothing),
    opt("-s", "s", &["silent"], Nothing),
    opt("-S", "S", &["show-error"], Nothing),
    opt("-f", "f", &["fail"], Nothing),
    opt("-G", "G", &["get"], Nothing),
    opt("-I", "I", &["head"], Nothing),
    opt("-i", "i", &["include"], Nothing),
    opt("-v", "v", &["verbose"], Nothing),
];

const WGET: &[Opt] = &[
    opt("-O", "O", &["output-document"], Value),
    opt("-o", "o", &["output-file"], Value),
    opt("-a", "a", &["append-output"], Value),
    opt("-i", "i", &["input-file"], Value),
    opt("-P", "P", &["directory-prefix"], Value),
    opt("-l", "l", &["level"], Value),
    opt("-t", "t", &["tries"], Value),
    opt("-T", "T", &["timeout"], Value),
    opt("-w", "w", &["wait"], Value),
    opt("-U", "U", &["user-agent"], Value),
    opt("-e", "e", &["execute"], Value),
    opt("-A", "A", &["accept"], Value),
    opt("-R", "R", &["reject"], Value),
    opt("-D", "D", &["domains"], Value),
    opt("-Q", "Q", &["quota"], Value),
    opt("-n", "n", &[], Value),
    opt("--method", "", &["method"], Value),
    opt("--post-data", "", &["post-data"], Value),
    opt("--post-file", "", &["post-file"], Value),
    opt("--body-data", "", &["body-data"], Value),
    opt("--body-file", "", &["body-file"], Value),
    opt("--header", "", &["header"], Value),
    opt("-r", "r", &["recursive"], Nothing),
    opt("-m", "m", &["mirror"], Nothing),
    opt("-q", "q", &["quiet"], Nothing),
    opt("-c", "c", &["continue"], Nothing),
    opt("-N", "N", &["timestamping"], Nothing),
    opt("-x", "x", &["force-directories"], Nothing),
    opt(
        "--no-check-certificate",
        "",
        &["no-check-certificate"],
        Nothing,
    ),
];

/// The commands band models. A deny pattern with flags on any other command matches only the
/// spellings it names (and short clusters); lint says so (P008).
pub const MODELS: &[Model] = &[
    Model {
        command: "rm",
        options: RM,
        subcommands: &[],
    },
    Model {
        command: "sed",
        options: SED,
        subcommands: &[],
    },
    Model {
        command: "chmod",
        options: CHMOD,
        subcommands: &[],
    },
    Model {
        command: "chown",
        options: CHOWN,
        subcommands: &[],
    },
    Model {
        command: "chgrp",
        options: CHOWN,
        subcommands: &[],
    },
    Model {
        command: "cp",
        options: CP,
        subcommands: &[],
    },
    Model {
        command: "mv",
        options: MV,
        subcommands: &[],
    },
    Model {
        command: "git",
        options: GIT,
        subcommands: &[("push", GIT_PUSH)],
    },
    Model {
        command: "curl",
        options: CURL,
        subcommands: &[],
    },
    Model {
        command: "wget",
        options: WGET,
        subcommands: &[],
    },
];

/// The model of `command`, if band has one.
pub fn model(command: &str) -> Option<&'static Model> {
    MODELS.iter().find(|m| m.command == command)
}

/// One element of a normalised argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An option: its canonical name (or, for an option the model does not list, as written up
    /// to any `=`), and its value if it took one.
    Flag { name: String, value: Option<String> },
    /// An operand (the command and subcommand included).
    Arg(String),
}

/// The option `--name` (without dashes) names: an exact long name, else the one option whose
/// long names `name` is a prefix of. Ambiguous or unknown: `None`.
fn find_long(opts: &'static [Opt], name: &str) -> Option<&'static Opt> {
    if name.is_empty() {
        return None;
    }
    if let Some(o) = opts.iter().find(|o| o.long.contains(&name)) {
        return Some(o);
    }
    let mut found: Option<&'static Opt> = None;
    for o in opts {
        if o.long.iter().any(|l| l.starts_with(name)) {
            if found.is_some_and(|f| f.canonical != o.canonical) {
                return None;
            }
            found = Some(o);
        }
    }
    found
}

fn find_short(opts: &'static [Opt], c: char) -> Option<&'static Opt> {
    opts.iter().find(|o| o.short.contains(c))
}

/// `argv` (argv\[0\] the bare command) normalised with the command's model; `None` when band
/// has no model for it. Linear in the total length of `argv`.
pub fn normalize<S: AsRef<str>>(argv: &[S]) -> Option<Vec<Item>> {
    let (first, rest) = argv.split_first()?;
    let m = model(first.as_ref())?;
    let mut out = vec![Item::Arg(first.as_ref().to_string())];
    let mut opts = m.options;
    let mut in_subcommand = m.subcommands.is_empty();
    let mut end_of_options = false;
    let mut args = rest.iter().map(AsRef::as_ref);
    while let Some(a) = args.next() {
        if end_of_options || a == "-" || !a.starts_with('-') {
            if !in_subcommand {
                // The first operand is the subcommand; its options follow it.
                in_subcommand = true;
                if let Some((_, sub)) = m.subcommands.iter().find(|(n, _)| *n == a) {
                    opts = sub;
                } else {
                    opts = &[];
                }
            }
            out.push(Item::Arg(a.to_string()));
            continue;
        }
        if a == "--" {
            end_of_options = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            match find_long(opts, name) {
                Some(o) => {
                    let value = match o.takes {
                        Nothing => None,
                        Attached => attached.map(str::to_string),
                        Value => attached
                            .map(str::to_string)
                            .or_else(|| args.next().map(str::to_string)),
                    };
                    out.push(Item::Flag {
                        name: o.canonical.to_string(),
                        value,
                    });
                }
                None => out.push(Item::Flag {
                    name: format!("--{name}"),
                    value: attached.map(str::to_string),
                }),
            }
            continue;
        }
        // A short cluster: letters until one that takes a value, which takes the rest.
        let cluster = &a[1..];
        for (i, c) in cluster.char_indices() {
            let after = &cluster[i + c.len_utf8()..];
            match find_short(opts, c) {
                Some(o) if o.takes != Nothing => {
                    let value = if !after.is_empty() {
                        Some(after.to_string())
                    } else if o.takes == Value {
                        args.next().map(str::to_string)
                    } else {
                        None
                    };
                    out.push(Item::Flag {
                        name: o.canonical.to_string(),
                        value,
                    });
                    break;
                }
                Some(o) => out.push(Item::Flag {
                    name: o.canonical.to_string(),
                    value: None,
                }),
                None => out.push(Item::Flag {
                    name: format!("-{c}"),
                    value: None,
                }),
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> Vec<String> {
        let argv: Vec<&str> = s.split_whitespace().collect();
        normalize(&argv)
            .unwrap_or_else(|| panic!("no model for {s}"))
            .into_iter()
            .map(|i| match i {
                Item::Arg(a) => a,
                Item::Flag { name, value: None } => name,
                Item::Flag {
                    name,
                    value: Some(v),
                } => format!("{name}={v}"),
            })
            .collect()
    }

    /// The flags (as a set: their order does not matter) and the operands (in order).
    fn meaning(s: &str) -> (std::collections::BTreeSet<String>, Vec<String>) {
        let (flags, args): (Vec<String>, Vec<String>) = norm(s)
            .into_iter()
            .partition(|a| a.starts_with('-') && a.len() > 1);
        (flags.into_iter().collect(), args)
    }

    fn same(spellings: &[&str]) {
        let first = meaning(spellings[0]);
        for s in &spellings[1..] {
            assert_eq!(meaning(s), first, "{s} vs {}", spellings[0]);
        }
    }

    #[test]
    fn unmodelled_commands() {
        assert_eq!(normalize(&["frobnicate", "-rf"]), None);
        assert_eq!(normalize::<&str>(&[]), None);
        assert_eq!(model("RM").map(|m| m.command), None, "names are exact");
    }

    #[test]
    fn models_are_consistent() {
        for m in MODELS {
            for table in std::iter::once(m.options).chain(m.subcommands.iter().map(|s| s.1)) {
                let mut shorts = std::collections::BTreeSet::new();
                let mut longs = std::collections::BTreeSet::new();
                for o in table {
                    assert!(
                        o.canonical.starts_with('-'),
                        "{}: {}",
                        m.command,
                        o.canonical
                    );
                    let expect = o
                        .short
                        .chars()
                        .next()
                        .map(|c| format!("-{c}"))
                        .or_else(|| o.long.first().map(|l| format!("--{l}")));
                    assert_eq!(expect.as_deref(), Some(o.canonical), "{}", m.command);
                    for c in o.short.chars() {
                        assert!(shorts.insert(c), "{}: -{c} twice", m.command);
                    }
                    for l in o.long {
                        assert!(longs.insert(*l), "{}: --{l} twice", m.command);
                    }
                }
            }
        }
    }

    #[test]
    fn rm() {
        same(&[
            "rm -rf x",
            "rm -fr x",
            "rm -r -f x",
            "rm -f -r x",
            "rm -Rf x",
            "rm -fR x",
            "rm --recursive --force x",
            "rm --force --recursive x",
            "rm --rec --for x",
            "rm -r --force x",
        ]);
        assert_eq!(norm("rm -rf x"), ["rm", "-r", "-f", "x"]);
        assert_eq!(
            norm("rm x -rf"),
            ["rm", "x", "-r", "-f"],
            "options after operands"
        );
        assert_eq!(norm("rm -- -rf"), ["rm", "-rf"], "after --: an operand");
        assert_eq!(norm("rm - x"), ["rm", "-", "x"]);
        assert_eq!(
            norm("rm --interactive=never x"),
            ["rm", "--interactive=never", "x"]
        );
        assert_eq!(
            norm("rm --zap x"),
            ["rm", "--zap", "x"],
            "unknown long: as written"
        );
    }

    #[test]
    fn sed() {
        same(&[
            "sed -i s/a/b/ f",
            "sed --in-place s/a/b/ f",
            "sed --in-pl s/a/b/ f",
        ]);
        same(&["sed -i.bak s/a/b/ f", "sed --in-place=.bak s/a/b/ f"]);
        assert_eq!(norm("sed -i.bak x f"), ["sed", "-i=.bak", "x", "f"]);
        assert_eq!(
            norm("sed -ie x f"),
            ["sed", "-i=e", "x", "f"],
            "GNU: -ie is suffix `e`"
        );
        assert_eq!(norm("sed -ni x f"), ["sed", "-n", "-i", "x", "f"]);
        same(&[
            "sed -e s/a/b/ f",
            "sed -es/a/b/ f",
            "sed --expression s/a/b/ f",
            "sed --expression=s/a/b/ f",
        ]);
        assert_eq!(
            norm("sed -e -i f"),
            ["sed", "-e=-i", "f"],
            "a value is not an option"
        );
        same(&["sed -E x", "sed -r x", "sed --regexp-extended x"]);
        same(&["sed -n x", "sed --quiet x", "sed --silent x"]);
    }

    #[test]
    fn chmod_chown() {
        same(&[
            "chmod -R 777 /",
            "chmod --recursive 777 /",
            "chmod --rec 777 /",
        ]);
        assert_eq!(
            norm("chmod -x f"),
            ["chmod", "-x", "f"],
            "a mode is kept as written"
        );
        same(&["chown -R u /", "chown --recursive u /"]);
        same(&[
            "chgrp -Rh g /",
            "chgrp --recursive -h g /",
            "chgrp -h -R g /",
        ]);
        same(&["chown --from=a:b c f", "chown --from a:b c f"]);
    }

    #[test]
    fn cp_mv() {
        same(&["cp -f a b", "cp --force a b"]);
        same(&["cp -rf a b", "cp -Rf a b", "cp --recursive --force a b"]);
        same(&[
            "cp -t dir a",
            "cp -tdir a",
            "cp --target-directory=dir a",
            "cp --target-directory dir a",
        ]);
        same(&["mv -f a b", "mv --force a b", "mv --forc a b"]);
    }

    #[test]
    fn git() {
        same(&[
            "git push -f origin main",
            "git push --force origin main",
            "git push origin main --force",
            "git push origin -f main",
        ]);
        assert_eq!(
            norm("git -C dir push --force"),
            ["git", "-C=dir", "push", "-f"],
            "a global option's value is not the subcommand"
        );
        assert_eq!(
            norm("git -Cdir push -fu o"),
            ["git", "-C=dir", "push", "-f", "-u", "o"]
        );
        assert_eq!(
            norm("git --git-dir=d push --force"),
            norm("git --git-dir d push --force")
        );
        // --force-with-lease is another option; `--forc` is ambiguous for git, kept as written.
        assert_eq!(
            norm("git push --force-with-lease"),
            ["git", "push", "--force-with-lease"]
        );
        assert_eq!(norm("git push --forc"), ["git", "push", "--forc"]);
        // An unmodelled subcommand: its options are kept as written.
        assert_eq!(
            norm("git commit -fam x"),
            ["git", "commit", "-f", "-a", "-m", "x"]
        );
    }

    #[test]
    fn curl_wget() {
        same(&[
            "curl -X DELETE u",
            "curl -XDELETE u",
            "curl --request DELETE u",
            "curl --request=DELETE u",
            "curl u --request=DELETE",
        ]);
        assert_eq!(
            norm("curl -sSLXPOST u"),
            ["curl", "-s", "-S", "-L", "-X=POST", "u"]
        );
        same(&[
            "curl -d x u",
            "curl --data x u",
            "curl --data=x u",
            "curl -dx u",
        ]);
        same(&["curl -k u", "curl --insecure u"]);
        same(&["wget -O f u", "wget --output-document=f u", "wget -Of u"]);
        same(&["wget --method DELETE u", "wget --method=DELETE u"]);
        assert_eq!(norm("wget -nc u"), ["wget", "-n=c", "u"]);
    }

    #[test]
    fn linear_in_the_argv() {
        // A cluster stops at the first letter that takes a value; nothing is revisited.
        let long = format!("rm -{} x", "r".repeat(10_000));
        assert_eq!(norm(&long).len(), 10_002);
        let values = format!("curl -{}", "X".repeat(10_000));
        assert_eq!(norm(&values).len(), 2);
    }
}
