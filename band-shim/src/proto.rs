//! The protocol between band-shim and band-server (one connection per call; see
//! `band_server::layers::cli::shim` for the exchange and why band-server trusts a request), and
//! the names and exit codes both sides agree on.

use serde::{Deserialize, Serialize};

/// Exit code of a refused command (as a shell's "found but cannot execute").
pub const EXIT_DENIED: i32 = 126;
/// Exit code of a name the shim does not know.
pub const EXIT_UNKNOWN: i32 = 127;

/// band-shim's name (`PR_SET_NAME`), set first thing. It contains a `/`, which no `exec` can give
/// a process, so a process with this name is running band-shim's code.
pub const COMM: &str = "band/shim";

/// shim → server, the one line band-shim writes, as soon as it is connected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimRequest {
    /// Where the kernel put the program image that writes this line (band-shim's own).
    pub image: ImageAddresses,
    pub argv: Vec<String>,
}

/// Two addresses of a program image from its auxiliary vector (what the kernel hands a program
/// at its start, and `/proc/<pid>/auxv` shows root): its program headers (`AT_PHDR`: where the
/// kernel loaded it) and its 16 random bytes (`AT_RANDOM`, on its stack). The kernel randomizes
/// both on every `exec`, so they name one image of one process: nothing that ran before it in the
/// process could know them, and no other process can read them (band-shim is not dumpable).
/// band-server takes a request only if these are the verified peer's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageAddresses {
    pub phdr: u64,
    pub random: u64,
}

/// `AT_PHDR` and `AT_RANDOM` of an auxiliary vector (pairs of native-endian words, type then
/// value, ended by `AT_NULL`), `None` when either is missing. Pure.
pub fn image_addresses(auxv: impl IntoIterator<Item = (u64, u64)>) -> Option<ImageAddresses> {
    let (mut phdr, mut random) = (None, None);
    for (key, value) in auxv {
        match key {
            0 => break,
            AT_PHDR => phdr = Some(value),
            AT_RANDOM => random = Some(value),
            _ => {}
        }
    }
    Some(ImageAddresses {
        phdr: phdr?,
        random: random?,
    })
}

/// The auxiliary vector's keys read here (`elf.h`; the same on every Linux architecture).
const AT_PHDR: u64 = 3;
const AT_RANDOM: u64 = 25;

/// server → shim: run the program whose descriptor comes with this line, or refuse with this
/// message and exit code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Verdict {
    Exec {
        /// The argv to run it with, when it is not the call's own (a `#!` script's interpreter).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argv: Option<Vec<String>>,
    },
    Denied {
        message: String,
        code: i32,
    },
}

/// The command name from `argv[0]`: its last path component.
pub fn command_name(arg0: &str) -> &str {
    arg0.rsplit('/').next().unwrap_or(arg0)
}

/// Why band-shim runs nothing: the exit code and the message on stderr.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: i32,
    pub message: String,
}

/// What band-shim does next, decided once for both of its starts (`crate::main` and the bare
/// start, `crate::bare`): run `program` with `argv`, or refuse.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<P> {
    Run { program: P, argv: Vec<String> },
    Refuse(Refusal),
}

/// The command band-shim was called as (`argv[0]`'s last component), or why it refuses to run:
/// the shim called by its own name.
pub fn called_as(args: &[String]) -> Result<String, Refusal> {
    let name = command_name(args.first().map(String::as_str).unwrap_or("")).to_string();
    if name.is_empty() || name == "shim" || name == "band-shim" {
        return Err(Refusal {
            code: EXIT_DENIED,
            message: "band-shim: run a command through its name in /band/bin, not the shim itself"
                .into(),
        });
    }
    Ok(name)
}

/// What band-server's answer to the call of `name` with `args` means: the program it sent and
/// the argv to run it with, or the refusal to exit with. No answer, or an allowed call without
/// a program, is a refusal (fail closed).
pub fn next<P, E: core::fmt::Display>(
    name: &str,
    args: &[String],
    answer: Result<(Verdict, Option<P>), E>,
) -> Next<P> {
    match answer {
        Err(e) => Next::Refuse(Refusal {
            code: EXIT_DENIED,
            message: format!(
                "band: {name}: cannot ask band-server about the call ({e}); refusing to run it"
            ),
        }),
        Ok((Verdict::Denied { message, code }, _)) => Next::Refuse(Refusal { code, message }),
        Ok((Verdict::Exec { .. }, None)) => Next::Refuse(Refusal {
            code: EXIT_DENIED,
            message: format!(
                "band: {name}: band-server allowed the call but sent no program; refusing to run it"
            ),
        }),
        Ok((Verdict::Exec { argv }, Some(program))) => Next::Run {
            program,
            argv: argv.unwrap_or_else(|| args.to_vec()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_image_is_two_entries_of_the_auxiliary_vector() {
        let auxv = [
            (33, 0x7ffd_0000),
            (3, 0x5555_0040),
            (6, 4096),
            (25, 0x7ffd_1234),
            (0, 0),
        ];
        assert_eq!(
            image_addresses(auxv),
            Some(ImageAddresses {
                phdr: 0x5555_0040,
                random: 0x7ffd_1234
            })
        );
        // Past AT_NULL, nothing counts; a missing entry is no image.
        assert_eq!(image_addresses([(3, 1), (0, 0), (25, 2)]), None);
        assert_eq!(image_addresses([(25, 2)]), None);
        // `c_ulong`: the comparison is the C library's, whatever its width.
        #[allow(clippy::unnecessary_cast)]
        let (phdr, random) = (libc::AT_PHDR as u64, libc::AT_RANDOM as u64);
        assert_eq!((AT_PHDR, AT_RANDOM), (phdr, random));
    }

    #[test]
    fn the_shim_by_its_own_name_runs_nothing() {
        for a0 in ["", "/band/bin/shim", "band-shim", "/x/band-shim"] {
            assert!(
                matches!(
                    called_as(&args(&[a0, "x"])),
                    Err(Refusal {
                        code: EXIT_DENIED,
                        ..
                    })
                ),
                "{a0:?}"
            );
        }
        assert_eq!(
            called_as(&args(&["/band/bin/jq", "."])),
            Ok("jq".to_string())
        );
    }

    #[test]
    fn each_answer_means_one_thing() {
        let a = args(&["jq", "."]);
        let run = |argv| Ok::<_, String>((Verdict::Exec { argv }, Some(7)));
        assert_eq!(
            next("jq", &a, run(None)),
            Next::Run {
                program: 7,
                argv: a.clone()
            }
        );
        assert_eq!(
            next("jq", &a, run(Some(args(&["/usr/bin/python3", "s"])))),
            Next::Run {
                program: 7,
                argv: args(&["/usr/bin/python3", "s"])
            }
        );
        let denied = Ok::<_, String>((
            Verdict::Denied {
                message: "no".into(),
                code: 127,
            },
            None::<i32>,
        ));
        assert_eq!(
            next("jq", &a, denied),
            Next::Refuse(Refusal {
                code: 127,
                message: "no".into()
            })
        );
        // Allowed but no program, or no answer at all: refused.
        let empty = Ok::<_, String>((Verdict::Exec { argv: None }, None::<i32>));
        assert!(matches!(
            next("jq", &a, empty),
            Next::Refuse(Refusal {
                code: EXIT_DENIED,
                ..
            })
        ));
        let gone = Err::<(Verdict, Option<i32>), _>("closed");
        assert!(matches!(
            next("jq", &a, gone),
            Next::Refuse(Refusal {
                code: EXIT_DENIED,
                ..
            })
        ));
    }
}
