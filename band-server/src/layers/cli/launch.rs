//! The command a launcher starts: `env jq .`, `xargs -n1 jq`, `timeout 5 curl …`.
//!
//! A launcher (an essential like `env` or `xargs`, or a declared `nice`, `timeout`, `nohup`,
//! `stdbuf`) looks its command up in `PATH` itself. A command the sandbox does not have is "No
//! such file or directory" there, and never reaches band-shim, so the gate would record nothing.
//! band-server sees the launcher's own call, though: [`launched`] reads from its argv the command
//! it will start, and the gate records that command's denial (`shim::undeclared_call`) when the
//! sandbox does not have it and the host does, as it does for bash's `command_not_found_handle`.
//! The launcher still runs and fails as before (exit 127). Pure.

/// The command line `argv` (a call judged as `argv[0]`, the launcher's bare name) starts, if the
/// launcher is one band knows and its command can be read from its arguments. xargs' command gets
/// more arguments from its input: only those on its command line are here.
pub fn launched(argv: &[String]) -> Option<&[String]> {
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
