//! The command line before clap reads it: band's own flags anywhere before `--`.
//!
//! One rule for every command: a command's flags go before it or after it (`band --json list` is
//! `band list --json`; [`hoist`] moves them after the command, where clap reads them).
//!
//! `band <skill>/<script> …` and `band run <skill>/<script> …` take band's flags (`--json`,
//! `--trace`, `--target host`, `--help`, … — every flag `band run` declares) on either side of the
//! script's `--key=value` arguments; `--` ends band's flags, and everything after it is the
//! script's (so a script input named `json` is `-- --json=…`). [`normalize`] moves band's flags
//! before the target and the script's after a `--`, which is what clap reads; `--help` after the
//! target becomes `band help <skill>/<script>`. Other commands are left as they are.

use std::ffi::{OsStr, OsString};

/// A plain look at the command line before clap reads it (building clap's whole `Command` and
/// parsing take about 0.3 ms): for `band run …`, the shortcut `band <skill>/<script> …` and
/// `band exec …`, the value of `--target` if given (anywhere before `--`, as [`normalize`]
/// allows; after it, the script's or the command's own), so band-server can start on a guess that
/// early (`pipeline::Early`). `None` when this look cannot tell it is a run (a global flag before
/// the command) or it is not one to start anything for (`--help`): the run, if it is one, then
/// guesses after clap.
pub(crate) fn run_target(argv: &[OsString]) -> Option<Option<String>> {
    let word = argv.get(1)?.to_str()?;
    if word != "run" && word != "exec" && (word.starts_with('-') || !word.contains('/')) {
        return None;
    }
    let mut target = None;
    let mut args = argv[2..].iter().map(|a| a.to_str());
    while let Some(arg) = args.next() {
        match arg? {
            "--" => break,
            "--help" | "-h" => return None,
            "--target" => target = Some(args.next()??.to_string()),
            a => {
                if let Some(v) = a.strip_prefix("--target=") {
                    target = Some(v.to_string());
                }
            }
        }
    }
    Some(target)
}

/// The command line, rewritten so that clap reads band's flags wherever they were given (see the
/// module's documentation), by `cli` (band's, [`super::Cli`]'s: built once per process, about a
/// tenth of a millisecond). `argv[0]` is the program.
pub(crate) fn normalize(cli: &clap::Command, argv: Vec<OsString>) -> Vec<OsString> {
    let Some(run) = cli.find_subcommand("run") else {
        return argv;
    };
    let Some(help) = cli.find_subcommand("help") else {
        return argv;
    };
    let globals = Flags::of(cli);
    let argv = hoist(cli, &globals, argv);
    // Global flags (`--color`) are band's too, wherever they are.
    let run_flags = Flags::of(run).and(&globals);

    // The command: the first word after band's global flags.
    let mut at = 1;
    while let Some(arg) = argv.get(at).and_then(|a| a.to_str()) {
        match globals.band_flag(arg) {
            Some(takes_value) => at += 1 + usize::from(takes_value),
            None => break,
        }
    }
    let Some(word) = argv.get(at).and_then(|a| a.to_str()) else {
        return argv;
    };
    let (head, mut rest) = if word == "run" {
        (argv[..=at].to_vec(), at + 1)
    } else if word.contains('/') && !word.starts_with('-') {
        // The shortcut is `band run`.
        let mut head = argv[..at].to_vec();
        head.push("run".into());
        (head, at)
    } else {
        return argv;
    };

    // `band run`'s flags before the target stay where they are.
    let mut before = Vec::new();
    let target = loop {
        let Some(arg) = argv.get(rest) else {
            // No target: clap says what is missing.
            return argv;
        };
        rest += 1;
        match arg.to_str().and_then(|a| run_flags.band_flag(a)) {
            Some(takes_value) => {
                before.push(arg.clone());
                if takes_value && let Some(value) = argv.get(rest) {
                    before.push(value.clone());
                    rest += 1;
                }
            }
            None if arg == "--" => return argv,
            None => break arg.clone(),
        }
    };

    let (mut band, mut script) = (Vec::new(), Vec::new());
    let mut asked_help = false;
    // A bare `--key` of the script takes the next argument as its value unless that starts
    // with `--` (as `band::contract::parse_cli_args` reads them).
    let mut value_may_follow = false;
    let mut tail = argv[rest..].iter();
    while let Some(arg) = tail.next() {
        let text = arg.to_str().unwrap_or("");
        if value_may_follow && !text.starts_with("--") {
            value_may_follow = false;
            script.push(arg.clone());
            continue;
        }
        if arg == "--" {
            script.extend(tail.by_ref().cloned());
            break;
        }
        if text == "--help" || text == "-h" {
            asked_help = true;
            continue;
        }
        match run_flags.band_flag(text) {
            Some(takes_value) => {
                band.push(arg.clone());
                if takes_value && let Some(value) = tail.next() {
                    band.push(value.clone());
                }
                value_may_follow = false;
            }
            None => {
                value_may_follow = text.starts_with("--") && !text.contains('=');
                script.push(arg.clone());
            }
        }
    }

    if asked_help {
        // `band help <target>`, with the flags `band help` has too (`--skills`, `--json`).
        let help_flags = Flags::of(help).and(&globals);
        let mut out = head[..head.len() - 1].to_vec();
        out.push("help".into());
        out.push(target);
        let mut kept = before.into_iter().chain(band).peekable();
        while let Some(flag) = kept.next() {
            let takes_value = run_flags.band_flag(flag.to_str().unwrap_or("")) == Some(true);
            let value = if takes_value && !flag.to_str().unwrap_or("").contains('=') {
                kept.next()
            } else {
                None
            };
            if help_flags.band_flag(flag.to_str().unwrap_or("")).is_some() {
                out.push(flag);
                out.extend(value);
            }
        }
        return out;
    }

    let mut out = head;
    out.extend(before);
    out.extend(band);
    out.push(target);
    if !script.is_empty() {
        out.push("--".into());
        out.extend(script);
    }
    out
}

/// A command's flags given before the command (`band --json list`, `band --json text/count
/// --text=a`, `band --json vm status`) moved after it (`band list --json`, `band run --json
/// text/count …`): one rule for every command, band's flags go anywhere before `--`. The flags
/// must all be the command's (or global); otherwise the line is left as it is and clap says
/// what is wrong with it.
fn hoist(cli: &clap::Command, globals: &Flags, argv: Vec<OsString>) -> Vec<OsString> {
    let text = |i: usize| argv.get(i).and_then(|a| a.to_str());
    let mut at = 1;
    while let Some(arg) = text(at) {
        match globals.band_flag(arg) {
            Some(takes_value) => at += 1 + usize::from(takes_value),
            None => break,
        }
    }
    if !text(at).is_some_and(|a| a.starts_with("--") && a != "--") {
        return argv;
    }
    // Each later word that names a command (or is a `<skill>/<script>`) is a candidate: the
    // flags before it must read as that command's, each value in its place.
    for word_at in at + 1..argv.len() {
        let Some(word) = text(word_at) else { continue };
        if word == "--" {
            break;
        }
        if word.starts_with('-') {
            continue;
        }
        let (name, command) = if word.contains('/') {
            ("run", cli.find_subcommand("run"))
        } else {
            (word, cli.find_subcommand(word))
        };
        let Some(command) = command else { continue };
        // A command of commands (`vm status`): the flags are its subcommand's.
        let sub = text(word_at + 1).and_then(|w| command.find_subcommand(w));
        let flags = Flags::of(sub.unwrap_or(command)).and(globals);
        let mut i = at;
        while i < word_at {
            match text(i).and_then(|a| flags.band_flag(a)) {
                Some(takes_value) => i += 1 + usize::from(takes_value),
                None => break,
            }
        }
        if i != word_at {
            continue;
        }
        let mut out = argv[..at].to_vec();
        if word.contains('/') {
            out.push(name.into());
        } else {
            out.push(argv[word_at].clone());
        }
        let mut after = word_at + 1;
        if sub.is_some() {
            out.push(argv[word_at + 1].clone());
            after += 1;
        }
        out.extend(argv[at..word_at].iter().cloned());
        if word.contains('/') {
            out.push(argv[word_at].clone());
        }
        out.extend(argv[after..].iter().cloned());
        return out;
    }
    argv
}

/// The long flags a clap command declares, and whether each takes a value.
struct Flags(Vec<(String, bool)>);

impl Flags {
    fn of(command: &clap::Command) -> Flags {
        Flags(
            command
                .get_arguments()
                .filter_map(|a| {
                    let long = a.get_long()?;
                    Some((long.to_string(), a.get_action().takes_values()))
                })
                .chain([("help".to_string(), false)])
                .collect(),
        )
    }

    fn and(mut self, other: &Flags) -> Flags {
        self.0.extend(other.0.iter().cloned());
        self
    }

    /// `Some(takes_a_separate_value)` when `arg` is one of these flags (`--name` or
    /// `--name=value`).
    fn band_flag(&self, arg: &str) -> Option<bool> {
        let flag = arg.strip_prefix("--")?;
        let (name, inline) = match flag.split_once('=') {
            Some((name, _)) => (name, true),
            None => (flag, false),
        };
        let (_, takes_value) = self.0.iter().find(|(long, _)| long == name)?;
        Some(*takes_value && !inline)
    }
}

/// Was `--json` given as one of band's own flags (before any `--`)? Errors are then one JSON
/// object on stdout.
pub(crate) fn wants_json(argv: &[OsString]) -> bool {
    let flags: Vec<&OsString> = argv
        .iter()
        .skip(1)
        .take_while(|a| a.as_os_str() != OsStr::new("--"))
        .collect();
    flags
        .iter()
        .any(|a| *a == "--json" || *a == "--format=json")
        || flags
            .windows(2)
            .any(|w| w[0] == "--format" && w[1] == "json")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn a_run_and_its_target_are_seen_before_clap() {
        let look = |args: &[&str]| {
            let argv: Vec<OsString> = std::iter::once("band")
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect();
            run_target(&argv)
        };
        let some = |t: &str| Some(Some(t.to_string()));
        assert_eq!(look(&["run", "text/count", "--text=a"]), Some(None));
        assert_eq!(look(&["text/count", "--text=a"]), Some(None));
        assert_eq!(
            look(&["run", "--target", "qemu", "text/count"]),
            some("qemu")
        );
        assert_eq!(
            look(&["text/count", "--text=a", "--target=host"]),
            some("host")
        );
        // After `--`, the script's own `--target`.
        assert_eq!(look(&["text/count", "--", "--target=qemu"]), Some(None));
        // `band exec`: band's flags before `--`, the command's after.
        assert_eq!(
            look(&["exec", "--band", "BAND.md", "--", "curl", "--target", "x"]),
            Some(None)
        );
        assert_eq!(
            look(&["exec", "--target=qemu", "--band", "BAND.md", "--", "ls"]),
            some("qemu")
        );
        assert_eq!(look(&["exec", "--help"]), None);
        // Not a run, or nothing to start for.
        assert_eq!(look(&["lint", "skills/text"]), None);
        assert_eq!(look(&["--color", "never", "run", "text/count"]), None);
        assert_eq!(look(&["run", "text/count", "--help"]), None);
        assert_eq!(look(&["run", "--target"]), None);
        assert_eq!(look(&[]), None);
    }

    /// The library's list of the flags a run takes for itself (lint's C004, `band help`) is the
    /// command line's own.
    #[test]
    fn the_run_flags_lint_knows_are_the_command_lines() {
        let cli = super::super::Cli::command();
        let run = cli.find_subcommand("run").expect("run");
        let flags = Flags::of(run).and(&Flags::of(&cli));
        let mut names: Vec<&str> = flags.0.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names, band::contract::RUN_FLAGS);
    }

    fn norm(args: &[&str]) -> Vec<String> {
        let argv = std::iter::once("band")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        normalize(&super::super::Cli::command(), argv)
            .into_iter()
            .skip(1)
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn band_flags_after_the_input_are_bands() {
        assert_eq!(
            norm(&["text/count", "--text=a", "--json"]),
            ["run", "--json", "text/count", "--", "--text=a"]
        );
        assert_eq!(
            norm(&[
                "run",
                "text/count",
                "--text",
                "a",
                "--target",
                "host",
                "--trace"
            ]),
            [
                "run",
                "--target",
                "host",
                "--trace",
                "text/count",
                "--",
                "--text",
                "a"
            ]
        );
        assert_eq!(
            norm(&["run", "--json", "text/count", "--target=host", "--text=a"]),
            [
                "run",
                "--json",
                "--target=host",
                "text/count",
                "--",
                "--text=a"
            ]
        );
    }

    #[test]
    fn band_flags_before_the_command_are_the_commands() {
        assert_eq!(
            norm(&["--json", "text/count", "--text=a"]),
            ["run", "--json", "text/count", "--", "--text=a"]
        );
        assert_eq!(
            norm(&["--target", "host", "--json", "text/count", "--text=a"]),
            [
                "run",
                "--target",
                "host",
                "--json",
                "text/count",
                "--",
                "--text=a"
            ]
        );
        assert_eq!(
            norm(&["--color", "never", "--json", "text/count"]),
            ["--color", "never", "run", "--json", "text/count"]
        );
        assert_eq!(norm(&["--json", "list"]), ["list", "--json"]);
        assert_eq!(
            norm(&["--skills", "list", "--json", "list"]),
            ["list", "--skills", "list", "--json"]
        );
        assert_eq!(
            norm(&["--json", "vm", "status"]),
            ["vm", "status", "--json"]
        );
        assert_eq!(
            norm(&["--json", "run", "x/y", "--n=1"]),
            ["run", "--json", "x/y", "--", "--n=1"]
        );
        // Not the command's flags: left for clap to refuse.
        assert_eq!(norm(&["--trace", "list"]), ["--trace", "list"]);
        assert_eq!(norm(&["--json"]), ["--json"]);
        assert_eq!(norm(&["--json", "--", "list"]), ["--json", "--", "list"]);
    }

    #[test]
    fn after_double_dash_everything_is_the_scripts() {
        assert_eq!(
            norm(&["text/count", "--trace", "--", "--json=x", "--help"]),
            ["run", "--trace", "text/count", "--", "--json=x", "--help"]
        );
    }

    #[test]
    fn a_value_of_the_script_is_never_taken_for_a_flag() {
        // `-h` after a bare `--key` is its value, as parse_cli_args reads it.
        assert_eq!(
            norm(&["x/y", "--n", "-h"]),
            ["run", "x/y", "--", "--n", "-h"]
        );
        // A `--` value is never one (parse_cli_args makes `--n` true): `--json` is band's.
        assert_eq!(
            norm(&["x/y", "--n", "--json"]),
            ["run", "--json", "x/y", "--", "--n"]
        );
    }

    #[test]
    fn help_after_the_target_is_the_scripts_help() {
        assert_eq!(
            norm(&["text/count", "--text=a", "--help"]),
            ["help", "text/count"]
        );
        assert_eq!(
            norm(&[
                "run",
                "text/count",
                "-h",
                "--json",
                "--skills",
                "d",
                "--trace"
            ]),
            ["help", "text/count", "--json", "--skills", "d"]
        );
        // Before the target it is `band run`'s own help.
        assert_eq!(norm(&["run", "--help"]), ["run", "--help"]);
    }

    #[test]
    fn other_commands_are_untouched() {
        for args in [
            &["lint", "--json", "x/y"][..],
            &["exec", "--band", "b.md", "--", "sh", "--json"],
            &["list"],
            &[],
            &["run"],
        ] {
            assert_eq!(norm(args), args);
        }
    }

    #[test]
    fn json_is_seen_before_double_dash_only() {
        let argv = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(wants_json(&argv(&["band", "history", "--json"])));
        assert!(wants_json(&argv(&[
            "band", "lint", "--format", "json", "x"
        ])));
        assert!(!wants_json(&argv(&["band", "lint", "--format", "sarif"])));
        assert!(!wants_json(&argv(&["band", "run", "x/y", "--", "--json"])));
    }
}
