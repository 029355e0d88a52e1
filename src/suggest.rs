//! "Did you mean": the nearest known name to a mistyped one (a command, skill, script or
//! argument).
//!
//! Closeness is Jaro-Winkler similarity (`strsim`), at least [`THRESHOLD`]. Jaro-Winkler rather
//! than an edit distance because the names are short: a fixed Levenshtein bound of 2 would pair
//! `ls` with `vm`, whereas Jaro-Winkler scales with length and rewards a shared prefix, the usual
//! shape of a typo (`lnt` → `lint`, `txt` → `text`, `cont` → `count`, `ls` → `list`). At 0.8
//! a suggestion shares most of its letters, in order, with what was typed.

/// The least Jaro-Winkler similarity that counts as "close enough".
pub const THRESHOLD: f64 = 0.8;

/// The candidate nearest to `name`, if any is close enough; on a tie, the first.
pub fn nearest<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut best: Option<(f64, &'a str)> = None;
    for candidate in candidates {
        let score = strsim::jaro_winkler(name, candidate);
        if score >= THRESHOLD && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMANDS: &[&str] = &[
        "lint",
        "fmt",
        "explain",
        "list",
        "help",
        "run",
        "exec",
        "lock",
        "history",
        "show",
        "audit",
        "init",
        "mcp",
        "setup",
        "vm",
        "doctor",
        "new-script",
    ];

    #[test]
    fn typos_find_their_name() {
        let near = |name| nearest(name, COMMANDS.iter().copied());
        assert_eq!(near("lnt"), Some("lint"));
        assert_eq!(near("exlpain"), Some("explain"));
        assert_eq!(near("hsitory"), Some("history"));
        assert_eq!(near("docter"), Some("doctor"));
        assert_eq!(near("newscript"), Some("new-script"));
        assert_eq!(
            nearest("txt", ["github", "text", "http-fetch"]),
            Some("text")
        );
        assert_eq!(nearest("cont", ["count", "summary"]), Some("count"));
        assert_eq!(nearest("txt", ["text"]), Some("text"));
    }

    #[test]
    fn far_names_find_nothing_and_short_ones_stay_short() {
        let near = |name| nearest(name, COMMANDS.iter().copied());
        assert_eq!(near("ls"), Some("list"));
        assert_eq!(near("zz"), None);
        assert_eq!(near("vx"), None);
        assert_eq!(near("frobnicate"), None);
        assert_eq!(near(""), None);
        assert_eq!(nearest("text", []), None);
    }

    #[test]
    fn the_best_wins_and_a_tie_goes_to_the_first() {
        assert_eq!(nearest("lis", ["lint", "list"]), Some("list"));
        assert_eq!(nearest("abcx", ["abcy", "abcz"]), Some("abcy"));
        assert_eq!(nearest("same", ["same", "sane"]), Some("same"));
    }
}
