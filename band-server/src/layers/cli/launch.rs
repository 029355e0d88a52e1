//! The command a launcher starts: `env jq .`, `xargs -n1 jq`, `timeout 5 curl …`.
//!
//! A launcher (an essential like `env` or `xargs`, or a declared `nice`, `timeout`, `nohup`,
//! `stdbuf`) looks its command up in `PATH` itself. A command the sandbox does not have is "No
//! such file or directory" there, and never reaches band-shim, so the gate would record nothing.
//! band-server sees the launcher's own call, though: [`launched`] reads from its argv the command
//! it will start, and the gate records that command's denial (`shim::undeclared_call`) when the
//! sandbox does not have it and the host does, as it does for bash's `command_not_found_handle`.
//! The launcher still runs and fails as before (exit 127). Pure.

use band::proto::CallSource;

/// The command line `argv` (a call judged as `argv[0]`, the launcher's bare name) starts, if the
/// launcher is one band knows and its command can be read from its arguments. xargs' command gets
/// more arguments from its input: only those on its command line are here.
pub(crate) fn launched(argv: &[String]) -> Option<&[String]> {
    let name = argv.first()?.as_str();
    let args = &argv[1..];
    let at = match name {
        "env" => env_command(args)?,
        "xargs" => options_then_command(
            args,
            &["-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"],
            &[
                "--arg-file",
                "--delimiter",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--replace",
                "--eof",
                "--process-slot-var",
            ],
        )?,
        "nice" => options_then_command(args, &["-n"], &["--adjustment"])?,
        "stdbuf" => options_then_command(
            args,
            &["-i", "-o", "-e"],
            &["--input", "--output", "--error"],
        )?,
        "nohup" => options_then_command(args, &[], &[])?,
        "timeout" => {
            // Options, then the duration, then the command.
            let d = options_then_command(args, &["-k", "-s"], &["--kill-after", "--signal"])?;
            d + 1
        }
        _ => return None,
    };
    let rest = args.get(at..)?;
    (!rest.is_empty() && !rest[0].is_empty()).then_some(rest)
}

/// Every command line `argv` (a call judged as `argv[0]`) starts through a launcher, and what the
/// record can know of its arguments: [`launched`]'s one command (xargs' is
/// [`CallSource::Appended`], or [`CallSource::Filled`] with `-I {}`/`-i`), the command of
/// `env -S 'STRING'` (split as env splits it), and each `-exec`/`-execdir`/`-ok`/`-okdir` command
/// of `find` ([`CallSource::Filled`] when a word holds `{}`). Pure.
pub(crate) fn started(argv: &[String]) -> Vec<(Vec<String>, Option<CallSource>)> {
    let name = argv.first().map(String::as_str).unwrap_or("");
    let args = argv.get(1..).unwrap_or_default();
    match name {
        "find" => find_commands(args),
        "env" => {
            if let Some(cmd) = launched(argv) {
                return vec![(cmd.to_vec(), None)];
            }
            env_split_command(args)
                .map(|c| vec![(c, None)])
                .unwrap_or_default()
        }
        "xargs" => {
            let Some(cmd) = launched(argv) else {
                return Vec::new();
            };
            let opts = &args[..args.len() - cmd.len()];
            let replaces = opts.iter().any(|o| {
                o == "-i" || o == "-I" || o == "-I{}" || o == "--replace" || o == "--replace={}"
            });
            let source = if replaces {
                CallSource::Filled
            } else {
                CallSource::Appended
            };
            vec![(cmd.to_vec(), Some(source))]
        }
        _ => launched(argv)
            .map(|c| vec![(c.to_vec(), None)])
            .unwrap_or_default(),
    }
}

/// find's `-exec`, `-execdir`, `-ok` and `-okdir` commands: the words up to `;` or `+`.
fn find_commands(args: &[String]) -> Vec<(Vec<String>, Option<CallSource>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < args.len()
                && !(args[end] == ";" || (args[end] == "+" && end > start && args[end - 1] == "{}"))
            {
                end += 1;
            }
            let cmd = args[start..end].to_vec();
            if !cmd.is_empty() && !cmd[0].is_empty() {
                let filled = cmd.iter().any(|w| w.contains("{}"));
                out.push((cmd, filled.then_some(CallSource::Filled)));
            }
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// The command of `env … -S STRING [args]` (also `-SSTRING`, `--split-string[=]STRING`, and a
/// `#!/usr/bin/env -S cmd …` line's one word `-S cmd …`): STRING split as env splits it, the
/// arguments after it appended, then read like any env command line. `None` when it holds what
/// only env knows at run time (`${VAR}`) or does not split.
fn env_split_command(args: &[String]) -> Option<Vec<String>> {
    let mut i = 0;
    let mut pre: Vec<String> = Vec::new();
    while let Some(a) = args.get(i) {
        let s = a.as_str();
        let string = if s == "-S" || s == "--split-string" {
            i += 1;
            args.get(i)?.clone()
        } else if let Some(rest) = s.strip_prefix("--split-string=") {
            rest.to_string()
        } else if let Some(rest) = s.strip_prefix("-S") {
            rest.to_string()
        } else if s.starts_with('-') && !s.starts_with("--") && s.contains('S') {
            // Flags before it in one word (`-iS…`) are not read.
            return None;
        } else {
            pre.push(a.clone());
            i += 1;
            continue;
        };
        let mut words = pre;
        words.extend(split_string(&string)?);
        words.extend_from_slice(args.get(i + 1..).unwrap_or_default());
        let at = env_command(&words)?;
        let cmd = words.get(at..)?.to_vec();
        return (!cmd.is_empty() && !cmd[0].is_empty()).then_some(cmd);
    }
    None
}

/// GNU env's `-S` splitting: white space separates words; `'…'` is literal (but `\\` and `\'`);
/// `"…"` and bare text take the escapes `\\ \" \' \_ (a space) \t \n \r \f \v \# \$`; `\c` ends
/// the string; a word starting with `#` starts a comment. `None` for `${VAR}` (expanded by env
/// at run time) or a quote left open.
fn split_string(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    #[derive(PartialEq)]
    enum Q {
        None,
        Single,
        Double,
    }
    let mut q = Q::None;
    while let Some(c) = chars.next() {
        match (&q, c) {
            (Q::None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (Q::None, '#') if !in_word => break,
            (Q::None, '\'') => {
                q = Q::Single;
                in_word = true;
            }
            (Q::None, '"') => {
                q = Q::Double;
                in_word = true;
            }
            (Q::Single, '\'') | (Q::Double, '"') => q = Q::None,
            (_, '$') if q != Q::Single => return None,
            (Q::Single, '\\') => match chars.peek() {
                Some('\\') | Some('\'') => cur.extend(chars.next()),
                _ => cur.push('\\'),
            },
            (_, '\\') => {
                let e = chars.next()?;
                match e {
                    'c' => break,
                    '_' if q == Q::None => {
                        if in_word {
                            words.push(std::mem::take(&mut cur));
                            in_word = false;
                        }
                        continue;
                    }
                    '_' => cur.push(' '),
                    't' => cur.push('\t'),
                    'n' => cur.push('\n'),
                    'r' => cur.push('\r'),
                    'f' => cur.push('\x0c'),
                    'v' => cur.push('\x0b'),
                    '\\' | '"' | '\'' | '#' | '$' | ' ' => cur.push(e),
                    _ => return None,
                }
                in_word = true;
            }
            (_, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if q != Q::None {
        return None;
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// Index in `args` of `env`'s command: after its options (`-i`, `-u NAME`, `-C DIR`, `--`) and
/// its `NAME=VALUE` words. `env -S 'cmd args'` (one string split by env) is not read.
fn env_command(args: &[String]) -> Option<usize> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--" => return Some(i + 1),
            "-u" | "-C" | "--unset" | "--chdir" => i += 2,
            "-S" | "--split-string" => return None,
            s if s.starts_with("-S") || s.starts_with("--split-string=") => return None,
            s if s.starts_with('-') && s.len() > 1 => i += 1,
            s if s.contains('=') => i += 1,
            _ => return Some(i),
        }
    }
    None
}

/// Index in `args` of the first word that is not an option, skipping the value of each option
/// in `short`/`long` given as a separate word (`-n 1`; `-n1` and `--max-args=1` are one word).
fn options_then_command(args: &[String], short: &[&str], long: &[&str]) -> Option<usize> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let s = a.as_str();
        if s == "--" {
            return Some(i + 1);
        }
        if !s.starts_with('-') || s == "-" {
            return Some(i);
        }
        i += if short.contains(&s) || long.contains(&s) {
            2
        } else {
            1
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn cmd(words: &[&str]) -> Option<Vec<String>> {
        launched(&v(words)).map(<[String]>::to_vec)
    }

    fn all(words: &[&str]) -> Vec<(Vec<String>, Option<CallSource>)> {
        started(&v(words))
    }

    #[test]
    fn find_exec_env_split_string_and_xargs_say_what_they_start() {
        use CallSource::{Appended, Filled};
        assert_eq!(
            all(&["find", ".", "-name", "*.c", "-exec", "uname", "-a", ";"]),
            vec![(v(&["uname", "-a"]), None)]
        );
        assert_eq!(
            all(&[
                "find", ".", "-execdir", "wc", "-l", "{}", "+", "-o", "-ok", "rm", "x{}y", ";",
                "-exec", "stat", "{}", "+"
            ]),
            vec![
                (v(&["wc", "-l", "{}"]), Some(Filled)),
                (v(&["rm", "x{}y"]), Some(Filled)),
                (v(&["stat", "{}"]), Some(Filled)),
            ]
        );
        // `+` ends a clause only after `{}`.
        assert_eq!(
            all(&["find", "-exec", "expr", "1", "+", "2", ";"]),
            vec![(v(&["expr", "1", "+", "2"]), None)]
        );
        assert_eq!(all(&["find", ".", "-exec"]), vec![]);
        assert_eq!(all(&["find", ".", "-exec", ";"]), vec![]);
        assert_eq!(
            all(&["env", "-S", "uname -a", "x"]),
            vec![(v(&["uname", "-a", "x"]), None)]
        );
        assert_eq!(
            all(&["env", "-S python3 -u", "/skill/s.py"]),
            vec![(v(&["python3", "-u", "/skill/s.py"]), None)]
        );
        assert_eq!(
            all(&[
                "env",
                "-i",
                "--split-string=A=1 -u B 'my tool' \\_x\\tz # c",
                "y"
            ]),
            vec![(v(&["my tool", "x\tz", "y"]), None)]
        );
        assert_eq!(
            all(&["env", "-S", "\"a b\"\\_c 'd\\'e'"]),
            vec![(v(&["a b", "c", "d'e"]), None)]
        );
        assert_eq!(all(&["env", "-S", "${TOOL} -a"]), vec![]);
        assert_eq!(all(&["env", "-S", "'open"]), vec![]);
        assert_eq!(all(&["env", "-S", "A=1"]), vec![]);
        assert_eq!(all(&["env", "jq", "."]), vec![(v(&["jq", "."]), None)]);
        assert_eq!(
            all(&["xargs", "-0", "uname"]),
            vec![(v(&["uname"]), Some(Appended))]
        );
        assert_eq!(
            all(&["xargs", "-I{}", "cp", "{}", "/tmp"]),
            vec![(v(&["cp", "{}", "/tmp"]), Some(Filled))]
        );
        assert_eq!(
            all(&["xargs", "-I", "{}", "cp", "{}", "/tmp"]),
            vec![(v(&["cp", "{}", "/tmp"]), Some(Filled))]
        );
        assert_eq!(all(&["nice", "uname"]), vec![(v(&["uname"]), None)]);
        assert_eq!(all(&["cat", "uname"]), vec![]);
    }

    #[test]
    fn the_command_a_launcher_starts() {
        assert_eq!(cmd(&["env", "jq", "."]), Some(v(&["jq", "."])));
        assert_eq!(
            cmd(&["env", "-i", "-u", "HOME", "A=1", "--", "jq", "-r"]),
            Some(v(&["jq", "-r"]))
        );
        assert_eq!(cmd(&["env", "A=1", "jq"]), Some(v(&["jq"])));
        assert_eq!(cmd(&["env"]), None);
        assert_eq!(cmd(&["env", "A=1"]), None);
        assert_eq!(cmd(&["env", "-S", "jq ."]), None);
        assert_eq!(
            cmd(&["xargs", "-0", "-n", "1", "-I{}", "jq", "{}"]),
            Some(v(&["jq", "{}"]))
        );
        assert_eq!(cmd(&["xargs", "--max-args=2", "rg"]), Some(v(&["rg"])));
        assert_eq!(cmd(&["xargs", "-r"]), None);
        assert_eq!(cmd(&["nice", "-n", "5", "jq"]), Some(v(&["jq"])));
        assert_eq!(
            cmd(&["timeout", "-s", "KILL", "5", "curl", "x"]),
            Some(v(&["curl", "x"]))
        );
        assert_eq!(cmd(&["timeout", "5"]), None);
        assert_eq!(cmd(&["nohup", "jq"]), Some(v(&["jq"])));
        assert_eq!(cmd(&["stdbuf", "-o", "L", "jq"]), Some(v(&["jq"])));
        assert_eq!(cmd(&["cat", "jq"]), None);
    }
}
