//! A linear pre-scan of YAML frontmatter, before the YAML parser sees it.
//!
//! The YAML parser band uses (libyaml, translated to Rust) keeps one "simple key" per open flow
//! collection and walks all of them for every token, so a file of nested `[` costs
//! tokens × depth: 200 KB of `[` took 18.6 s to parse. Its deserializer stops at depth 128 and
//! bounds alias expansion, but only after the whole file is tokenized. This scan runs first, in
//! one pass over the bytes, and refuses frontmatter that no hand-written band needs:
//!
//! - more than [`MAX_FRONTMATTER_BYTES`] bytes;
//! - flow collections (`[`, `{`) nested deeper than [`MAX_FLOW_DEPTH`];
//! - more than [`MAX_BRACKETS`] `[` and `{` in all, wherever they are (strings and comments
//!   included). This bound needs no YAML lexing and caps the parser's flow depth whatever quotes
//!   hide, so the parse after the scan costs at most tokens × [`MAX_BRACKETS`]: linear;
//! - block indentation (a stack of increasing line indents, compact `- `/`? ` items included)
//!   deeper than [`MAX_BLOCK_DEPTH`];
//! - more than [`MAX_ANCHORS`] anchors (`&name`) or [`MAX_ALIASES`] aliases (`*name`); the
//!   deserializer additionally stops any alias expansion beyond 100 × the document's events.
//!
//! The scan over-approximates (a `[` inside a quoted string or a comment counts), so it can only
//! refuse more, never let a deeper document through. Each byte is visited once; the indent stack pushes at most
//! one entry per indent it sees and pops each entry at most once.

use crate::diag::Loc;

/// The largest frontmatter band parses (a band file is itself limited to the same size).
pub const MAX_FRONTMATTER_BYTES: usize = 256 * 1024;
/// The deepest nesting of flow collections (`[`/`{`).
pub const MAX_FLOW_DEPTH: usize = 64;
/// The most `[` and `{` characters in one frontmatter.
pub const MAX_BRACKETS: usize = 256;
/// The deepest block indentation, in levels.
pub const MAX_BLOCK_DEPTH: usize = 64;
/// The most anchors (`&name`) in one frontmatter.
pub const MAX_ANCHORS: usize = 64;
/// The most aliases (`*name`) in one frontmatter.
pub const MAX_ALIASES: usize = 64;

/// Which limit a frontmatter exceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Excess {
    #[error("the frontmatter is {0} bytes; band parses at most {MAX_FRONTMATTER_BYTES}")]
    Size(usize),
    #[error("flow collections (`[` and `{{`) nest deeper than {MAX_FLOW_DEPTH} levels")]
    FlowDepth,
    #[error("the frontmatter has more than {MAX_BRACKETS} `[` and `{{`")]
    Brackets,
    #[error("block indentation nests deeper than {MAX_BLOCK_DEPTH} levels")]
    BlockDepth,
    #[error("the frontmatter has more than {MAX_ANCHORS} anchors (`&name`)")]
    Anchors,
    #[error("the frontmatter has more than {MAX_ALIASES} aliases (`*name`)")]
    Aliases,
}

impl Excess {
    /// What to do about it.
    pub fn hint(self) -> &'static str {
        match self {
            Excess::Size(_) => {
                "band files are short hand-written YAML; move data into files the script reads"
            }
            Excess::FlowDepth | Excess::Brackets | Excess::BlockDepth => {
                "flatten the frontmatter: rules are flat lists of strings (see docs/band-format.md, limits)"
            }
            Excess::Anchors | Excess::Aliases => {
                "write the values out instead of reusing them with `&anchor` and `*alias`"
            }
        }
    }
}

/// The first limit a frontmatter exceeds and where (file line and column, `first_line` being
/// the file line the frontmatter starts on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooComplex {
    pub excess: Excess,
    pub loc: Loc,
}

/// Check `yaml` against the limits above. Linear in `yaml.len()`; see the module documentation.
pub fn prescan(yaml: &str, first_line: usize) -> Result<(), TooComplex> {
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(TooComplex {
            excess: Excess::Size(yaml.len()),
            loc: Loc::new(first_line, 1),
        });
    }
    let mut scan = Scan::default();
    for (n, line) in yaml.split_inclusive('\n').enumerate() {
        scan.line(line.as_bytes())
            .map_err(|(excess, at)| TooComplex {
                excess,
                loc: Loc::new(
                    first_line + n,
                    line.get(..at).map_or(at, |s| s.chars().count()) + 1,
                ),
            })?;
    }
    Ok(())
}

/// The scan's state between lines.
#[derive(Debug, Default)]
struct Scan {
    /// Increasing indents of the open block levels.
    indents: Vec<usize>,
    flow_depth: usize,
    brackets: usize,
    anchors: usize,
    aliases: usize,
    /// Bytes visited, for the linearity test.
    #[cfg(test)]
    visited: usize,
}

/// A byte that may end an anchor or alias name's preceding context.
fn opens_token(prev: Option<u8>) -> bool {
    prev.is_none_or(|b| matches!(b, b' ' | b'\t' | b'[' | b'{' | b','))
}

/// The characters libyaml accepts in an anchor name.
fn is_anchor_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

impl Scan {
    /// One line (with its `\n`, if any). On error: the limit and the byte offset in the line.
    fn line(&mut self, line: &[u8]) -> Result<(), (Excess, usize)> {
        // Indentation: spaces, then compact block indicators (`- `, `? `, `: `) with their spaces.
        let mut i = 0;
        while line.get(i) == Some(&b' ') {
            i += 1;
        }
        let blank = matches!(line.get(i), None | Some(b'\n' | b'\r' | b'#'));
        if !blank {
            while self.indents.last().is_some_and(|&top| top > i) {
                self.indents.pop();
            }
            if self.indents.last().is_none_or(|&top| top < i) {
                self.indents.push(i);
            }
            self.check_block(i)?;
            while matches!(line.get(i), Some(b'-' | b'?' | b':'))
                && matches!(line.get(i + 1), None | Some(b' ' | b'\n' | b'\r'))
            {
                i += 1;
                while line.get(i) == Some(&b' ') {
                    i += 1;
                }
                if self.indents.last().is_none_or(|&top| top < i) {
                    self.indents.push(i);
                }
                self.check_block(i)?;
            }
        }
        #[cfg(test)]
        {
            self.visited += i;
        }
        // The rest: brackets, anchors and aliases. Comments are not skipped: a ` #` inside a
        // quoted string is no comment, and telling the two apart would take a YAML lexer.
        let mut prev = if i == 0 {
            None
        } else {
            line.get(i - 1).copied()
        };
        for (j, &b) in line.iter().enumerate().skip(i) {
            #[cfg(test)]
            {
                self.visited += 1;
            }
            match b {
                b'[' | b'{' => {
                    self.flow_depth += 1;
                    self.brackets += 1;
                    if self.flow_depth > MAX_FLOW_DEPTH {
                        return Err((Excess::FlowDepth, j));
                    }
                    if self.brackets > MAX_BRACKETS {
                        return Err((Excess::Brackets, j));
                    }
                }
                b']' | b'}' => self.flow_depth = self.flow_depth.saturating_sub(1),
                b'&' | b'*'
                    if opens_token(prev) && line.get(j + 1).is_some_and(|&c| is_anchor_char(c)) =>
                {
                    let (count, max, excess) = if b == b'&' {
                        (&mut self.anchors, MAX_ANCHORS, Excess::Anchors)
                    } else {
                        (&mut self.aliases, MAX_ALIASES, Excess::Aliases)
                    };
                    *count += 1;
                    if *count > max {
                        return Err((excess, j));
                    }
                }
                _ => {}
            }
            prev = Some(b);
        }
        Ok(())
    }

    fn check_block(&self, at: usize) -> Result<(), (Excess, usize)> {
        if self.indents.len() > MAX_BLOCK_DEPTH {
            return Err((Excess::BlockDepth, at));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(yaml: &str) -> Option<(Excess, Loc)> {
        prescan(yaml, 2).err().map(|e| (e.excess, e.loc))
    }

    const REAL: &str = r#"band: github-issues
description: |
  List and create GitHub issues.
    - nested notes [see docs]
      - deeper
allow:
  cli: ["gh issue *", "jq *", 'rm -rf *']   # a comment [with] {brackets}
  net:
    - api.github.com
    - "*.githubusercontent.com"
  read: [data/**, "{a,b}/*.json"]
defaults: &defaults
  x: 1
other:
  <<: *defaults
matrix: [[1, 2], [3, {a: [4]}]]
- - - compact
"#;

    #[test]
    fn real_bands_pass() {
        assert_eq!(err(REAL), None);
        assert_eq!(err(""), None);
        assert_eq!(err("a: b\r\nc: [d]\r\n"), None);
        let depth_64 = format!("x: {}{}\n", "[".repeat(64), "]".repeat(64));
        assert_eq!(err(&depth_64), None);
    }

    #[test]
    fn nested_flow_is_refused_where_it_goes_too_deep() {
        let deep = format!("allow:\n  cli: {}\n", "[".repeat(200_000));
        assert_eq!(err(&deep), Some((Excess::FlowDepth, Loc::new(3, 8 + 64))));
        let braces = format!("a: {}", "{b: ".repeat(100));
        assert_eq!(
            err(&braces),
            Some((Excess::FlowDepth, Loc::new(2, 4 + 64 * 4)))
        );
    }

    #[test]
    fn closers_in_strings_do_not_hide_depth() {
        // `"]"` lowers the naive depth, but the bracket count still bounds the parser's depth.
        let sneaky = format!("a: {}", r#"[ "]" "#.repeat(2000));
        assert_eq!(err(&sneaky).map(|e| e.0), Some(Excess::Brackets));
        // A ` #` inside a string is no comment: what follows still counts.
        let hash = format!("x: [\"a #\", {}", "[".repeat(200_000));
        assert_eq!(err(&hash), Some((Excess::FlowDepth, Loc::new(2, 11 + 64))));
        let comment = format!("x: 1 # {}", "[".repeat(100));
        assert_eq!(
            err(&comment).map(|e| e.0),
            Some(Excess::FlowDepth),
            "comments count too"
        );
        // Many small lists are fine up to the count.
        let many = "- [a]\n".repeat(MAX_BRACKETS);
        assert_eq!(err(&many), None);
        let too_many = "- [a]\n".repeat(MAX_BRACKETS + 1);
        assert_eq!(
            err(&too_many),
            Some((Excess::Brackets, Loc::new(2 + MAX_BRACKETS, 3)))
        );
    }

    #[test]
    fn deep_block_indentation() {
        let deep: String = (0..100)
            .map(|n| format!("{}k{n}:\n", " ".repeat(n)))
            .collect();
        assert_eq!(err(&deep), Some((Excess::BlockDepth, Loc::new(2 + 64, 65))));
        let compact = format!("{}x\n", "- ".repeat(100_000));
        assert_eq!(err(&compact), Some((Excess::BlockDepth, Loc::new(2, 129))));
        // Going back out pops levels: a long file of shallow blocks is fine.
        let wide = "a:\n  b:\n    c: 1\n".repeat(1000);
        assert_eq!(err(&wide), None);
    }

    #[test]
    fn anchors_and_aliases() {
        let laughs = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n\
            b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n\
            c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n\
            d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n\
            e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n\
            f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n\
            g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n\
            h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n\
            i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
        assert_eq!(err(laughs), Some((Excess::Aliases, Loc::new(10, 11))));
        let anchors: String = (0..65).map(|n| format!("k{n}: &a{n} 1\n")).collect();
        assert_eq!(err(&anchors), Some((Excess::Anchors, Loc::new(66, 6))));
        // Globs are not aliases (a `*` starts one only before a name character, after a space or
        // a flow indicator).
        let globs = "cli: [\"jq *\", \"*.x\", 'ls *.txt']\nnet:\n  - \"*.github.com\"\n  - gh *\n";
        assert_eq!(err(&globs.repeat(100)), None);
    }

    #[test]
    fn size() {
        let big = format!("a: \"{}\"\n", "x".repeat(MAX_FRONTMATTER_BYTES));
        assert_eq!(
            err(&big),
            Some((Excess::Size(MAX_FRONTMATTER_BYTES + 6), Loc::new(2, 1)))
        );
    }

    #[test]
    fn columns_count_characters() {
        let deep = format!("é: {}", "[".repeat(65));
        assert_eq!(err(&deep), Some((Excess::FlowDepth, Loc::new(2, 4 + 64))));
    }

    /// Linear by construction: every byte is visited at most once, and the indent stack changes
    /// at most twice per visited byte; checked on inputs of every shape the limits care about.
    #[test]
    fn visits_each_byte_at_most_once() {
        let shapes: Vec<String> = vec![
            REAL.repeat(50),
            "[a, b]\n".repeat(100),
            format!("x: {}", "[".repeat(10_000)),
            (0..2000)
                .map(|n| format!("{}k:\n", " ".repeat(n % 60)))
                .collect(),
            "- - - - x\n  - y\n".repeat(500),
            "a: \"].]{}[\" # [[[[[[[\n".repeat(500),
        ];
        for s in &shapes {
            let mut scan = Scan::default();
            let mut pushes_bound = 0;
            for line in s.split_inclusive('\n') {
                pushes_bound += line.len();
                if scan.line(line.as_bytes()).is_err() {
                    break;
                }
                assert!(scan.indents.len() <= pushes_bound);
            }
            assert!(scan.visited <= s.len(), "{} > {}", scan.visited, s.len());
        }
    }
}
