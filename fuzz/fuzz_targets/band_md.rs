//! BAND.md frontmatter: `parse_band` on any text, then the key-path locator on the same text with
//! paths built from the keys that appear in it. Neither may panic, and every position reported
//! must lie inside the text.
#![no_main]

use std::path::Path;

use band::manifest::locate::{Step, locate};
use band::manifest::parse_band;
use libfuzzer_sys::fuzz_target;

/// Up to 8 distinct `key` words (text before a `:` on a line), so paths hit real keys.
fn keys(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start().trim_start_matches("- ").trim_start();
        if let Some((k, _)) = t.split_once(':') {
            let k = k.trim().trim_matches(|c| c == '"' || c == '\'');
            if !out.contains(&k) {
                out.push(k);
            }
        }
        if out.len() == 8 {
            break;
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_band(Path::new("BAND.md"), source);
    let lines = source.lines().count().max(1);
    for d in &parsed.diagnostics {
        // Line 0 (Loc::FILE) means "the whole file".
        assert!(
            d.loc.line <= lines,
            "diagnostic {d:?} points past line {lines}"
        );
    }
    if let Some(band) = &parsed.band {
        let _ = band.own_policy();
    }

    // The locator on its own, on the whole text as if it were frontmatter starting at line 2.
    let ks = keys(source);
    let mut paths: Vec<Vec<Step<'_>>> = Vec::new();
    for &a in &ks {
        paths.push(vec![Step::Key(a)]);
        for i in 0..3 {
            paths.push(vec![Step::Key(a), Step::Index(i)]);
            paths.push(vec![Step::Index(i), Step::Key(a)]);
        }
        for &b in &ks {
            paths.push(vec![Step::Key(a), Step::Key(b)]);
            paths.push(vec![Step::Key(a), Step::Index(0), Step::Key(b)]);
            paths.push(vec![Step::Key(a), Step::Key(b), Step::Index(1)]);
            paths.push(vec![
                Step::Key(a),
                Step::Key(b),
                Step::Index(0),
                Step::Key(a),
            ]);
        }
    }
    for path in &paths {
        let loc = locate(source, 2, path);
        assert!(
            loc.line >= 2 && loc.line < 2 + lines && loc.col >= 1,
            "{loc:?} for {path:?} is outside the text"
        );
    }
});
