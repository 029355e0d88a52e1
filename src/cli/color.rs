//! Colour: `--color auto|always|never`, then `NO_COLOR` (any value: never), then `FORCE_COLOR`
//! (set and not `0`/`false`: always), then whether the stream is a terminal. Decided once in
//! `main` ([`init`]) and asked by whatever colours its output ([`stdout`], [`stderr`]); clap's
//! own help and errors follow the same choice ([`from_argv`]).

use std::ffi::{OsStr, OsString};
use std::io::IsTerminal;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ColorWhen {
    /// Colour at a terminal, unless NO_COLOR is set (FORCE_COLOR: always).
    #[default]
    Auto,
    Always,
    Never,
}

static CHOICE: OnceLock<ColorWhen> = OnceLock::new();

/// The choice given by the flag, with the environment applied: `Always` or `Never`, or `Auto`
/// when only a terminal decides.
pub(crate) fn resolve(
    flag: ColorWhen,
    no_color: Option<&OsStr>,
    force_color: Option<&OsStr>,
) -> ColorWhen {
    match flag {
        ColorWhen::Always | ColorWhen::Never => flag,
        ColorWhen::Auto if no_color.is_some_and(|v| !v.is_empty()) => ColorWhen::Never,
        ColorWhen::Auto
            if force_color.is_some_and(|v| !matches!(v.to_str(), Some("0" | "false"))) =>
        {
            ColorWhen::Always
        }
        ColorWhen::Auto => ColorWhen::Auto,
    }
}

fn from_env(flag: ColorWhen) -> ColorWhen {
    resolve(
        flag,
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("FORCE_COLOR").as_deref(),
    )
}

/// Record the choice of `--color` for the rest of the process.
pub(crate) fn init(flag: ColorWhen) {
    let _ = CHOICE.set(from_env(flag));
}

fn enabled(is_terminal: bool) -> bool {
    match CHOICE
        .get()
        .copied()
        .unwrap_or_else(|| from_env(ColorWhen::Auto))
    {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => is_terminal,
    }
}

/// Colour what goes to stdout?
pub(crate) fn stdout() -> bool {
    enabled(std::io::stdout().is_terminal())
}

/// Colour what goes to stderr?
#[allow(dead_code)]
pub(crate) fn stderr() -> bool {
    enabled(std::io::stderr().is_terminal())
}

/// clap's colour for its help and errors, before clap has read `--color` itself (the last
/// `--color` before any `--` counts).
pub(crate) fn from_argv(argv: &[OsString]) -> clap::ColorChoice {
    let mut flag = ColorWhen::Auto;
    let mut args = argv
        .iter()
        .skip(1)
        .take_while(|a| a.as_os_str() != OsStr::new("--"));
    while let Some(arg) = args.next() {
        let value = match arg.to_str() {
            Some("--color") => args.next().and_then(|v| v.to_str()),
            Some(a) => a.strip_prefix("--color="),
            None => None,
        };
        if let Some(v) = value.and_then(|v| <ColorWhen as clap::ValueEnum>::from_str(v, true).ok())
        {
            flag = v;
        }
    }
    match from_env(flag) {
        ColorWhen::Always => clap::ColorChoice::Always,
        ColorWhen::Never => clap::ColorChoice::Never,
        ColorWhen::Auto => clap::ColorChoice::Auto,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_then_no_color_then_force_color() {
        let s = |v: &'static str| Some(OsStr::new(v));
        use ColorWhen::*;
        assert_eq!(resolve(Always, s("1"), None), Always);
        assert_eq!(resolve(Never, None, s("1")), Never);
        assert_eq!(resolve(Auto, s("1"), s("1")), Never);
        assert_eq!(resolve(Auto, s(""), s("1")), Always);
        assert_eq!(resolve(Auto, None, s("1")), Always);
        assert_eq!(resolve(Auto, None, s("0")), Auto);
        assert_eq!(resolve(Auto, None, s("false")), Auto);
        assert_eq!(resolve(Auto, None, None), Auto);
    }
}
