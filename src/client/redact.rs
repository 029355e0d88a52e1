//! Masking declared secrets in everything band shows or keeps about a run, as CI systems mask
//! secrets in their logs.
//!
//! A [`Masker`] is built from the run's secret values (`env.secrets`, read from the caller's
//! environment). It replaces every occurrence of a value — and of the forms a script is likely to
//! print it in — with `[secret NAME]`, in: the events streamed while the run is under way (stdout
//! and stderr chunks, each CLI call's argv, refusals, limits), the result's stdout, stderr, CLI
//! calls, refusals, error, network report and written paths, and the documents the ledger keeps
//! with `--record-io`. So `--trace`, the stderr a person or an agent reads, `--json`, the MCP
//! result and its progress messages, and the hash-chained ledger (which can never be redacted
//! afterwards) never hold a declared secret.
//!
//! The forms masked, for a value `v`, are two tables, so the next form is one line in one of them:
//! - [`ENCODINGS`], the ways `v` is written out whole: as it is (and each line of a multi-line
//!   value: a PEM key printed line by line); base64, standard and URL-safe alphabets, padded and
//!   unpadded; the characters of `v`'s base64 at each of the three byte offsets it can take inside
//!   a longer blob (only the characters that depend on `v`'s bytes alone: a secret inside
//!   `base64(a + v + b)`, such as `user:secret` in a Basic header, is caught whatever `a` and `b`
//!   are); hex, lower and upper case;
//! - [`ESCAPES`], the ways any one character of such a text may be escaped on top: percent-encoded
//!   (upper- or lower-case hex, and once more: `%252F`, a URL quoted twice), `+` for a space (form
//!   encoding), JSON's `\uXXXX` (either case) and short escapes (`\/`, `\"`, `\\`, `\n`…).
//!
//! A match is a text where each character of a form appears as itself or as any of its escapes,
//! each character independently. So every library's choice of what to leave unescaped is covered
//! at once (Python's `quote` with its default `safe='/'` and `quote_plus`, JavaScript's
//! `encodeURIComponent` and `encodeURI`, Go's `url.QueryEscape` and `url.PathEscape`, curl's
//! `--data-urlencode`, `jq @uri`), and so are the combinations (base64 then percent-encoded, a
//! JSON-escaped URL), while a text that does not decode to the value (a near miss: one character
//! different, a different escape) is left alone.
//!
//! The output data is left alone: the script's output document and the files it writes back are
//! what the caller asked for. [`Masker::names_in`] names (never shows) the secrets they
//! contain, so band can warn.
//!
//! **Short values.** A value shorter than [`MIN_SECRET_BYTES`] is not masked: masking every `1`
//! or `ab` in the logs would destroy them and hide nothing worth hiding (such a value is
//! guessable). band says so in a warning on every run that has one. Derived forms shorter than
//! [`MIN_SECRET_BYTES`] are not masked either.
//!
//! **Streams.** Stdout and stderr arrive in chunks, and a value may be split across two. A
//! [`StreamMasker`] holds back the last `longest match − 1` bytes of what it has seen until the
//! next chunk (or the end of the run) shows whether they start a secret, so a split value is
//! masked exactly as a whole one; at most that many bytes are delayed, and none after a line
//! break when no value spans lines (so line-by-line output is shown line by line). A stream that
//! ends in the start of a form (cut short by a log limit in the middle of a secret) has that end
//! masked too, in the events and in the result's stdout and stderr.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

use crate::proto::{Denial, Event, RunResult};

/// Values shorter than this (in bytes) are not masked; see the module docs.
pub const MIN_SECRET_BYTES: usize = 4;

/// Masks the declared secrets of one run. Its `Debug` names the secrets, never their values.
#[derive(Clone, Default)]
pub struct Masker {
    /// Every form to mask, with the index of its secret's name in `names`.
    patterns: Vec<(Form, usize)>,
    names: Vec<String>,
    /// Secrets too short to mask.
    short: Vec<String>,
    /// The longest text a form matches, in bytes.
    longest: usize,
    /// Can a match contain a line break?
    multi_line: bool,
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Masker")
            .field("secrets", &self.names)
            .field("not_masked", &self.short)
            .field("forms", &self.patterns.len())
            .finish()
    }
}

/// A masked stretch of text: `[start, end)` and the secret it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    secret: usize,
}

impl Masker {
    /// A masker for the run's secrets (name → value).
    pub fn new(secrets: &BTreeMap<String, String>) -> Masker {
        let mut m = Masker::default();
        for (name, value) in secrets {
            if value.is_empty() {
                continue;
            }
            if value.len() < MIN_SECRET_BYTES {
                m.short.push(name.clone());
                continue;
            }
            let idx = m.names.len();
            m.names.push(name.clone());
            for text in forms(value) {
                if text.len() >= MIN_SECRET_BYTES && !m.patterns.iter().any(|(p, _)| p.text == text)
                {
                    let form = Form::new(&text);
                    m.longest = m.longest.max(form.longest);
                    m.multi_line |= text.contains('\n');
                    m.patterns.push((form, idx));
                }
            }
        }
        m
    }

    /// Does it mask anything?
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The secrets too short to be masked (names).
    pub fn not_masked(&self) -> &[String] {
        &self.short
    }

    /// Every occurrence of every form in `text`, unmerged. With `at_end`, `text` is the end of
    /// a stream, and an end (at least [`MIN_SECRET_BYTES`] long) that is the start of a match (a
    /// stream cut short by a limit in the middle of a secret) is an occurrence too.
    fn occurrences(&self, text: &str, at_end: bool) -> Vec<Span> {
        let bytes = text.as_bytes();
        let mut found = Vec::new();
        for (form, secret) in &self.patterns {
            // Overlapping occurrences too (`abab` twice in `ababab`). A match starts with a whole
            // character, so never inside one.
            for start in 0..bytes.len() {
                if !form.first[usize::from(bytes[start])] {
                    continue;
                }
                let end = match form.reach(bytes, start) {
                    Reach::Whole(end) => end,
                    Reach::Cut if at_end && bytes.len() - start >= MIN_SECRET_BYTES => bytes.len(),
                    _ => continue,
                };
                found.push(Span {
                    start,
                    end,
                    secret: *secret,
                });
            }
        }
        found
    }

    /// [`Masker::occurrences`], merged where they overlap or touch, in order.
    fn spans(&self, text: &str, at_end: bool) -> Vec<Span> {
        let mut found = self.occurrences(text, at_end);
        found.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        let mut merged: Vec<Span> = Vec::new();
        for s in found {
            match merged.last_mut() {
                Some(last) if s.start <= last.end => last.end = last.end.max(s.end),
                _ => merged.push(s),
            }
        }
        merged
    }

    fn marker(&self, secret: usize) -> String {
        format!("[secret {}]", self.names[secret])
    }

    /// `text` with every form of every secret replaced by `[secret NAME]`.
    pub fn mask(&self, text: &str) -> String {
        self.mask_spans(text, false)
    }

    /// A whole stream (stdout, stderr), masked: as [`Masker::mask`], and an end that is the
    /// start of a form is masked too (the stream may have been cut at a limit).
    pub fn mask_stream(&self, text: &str) -> String {
        self.mask_spans(text, true)
    }

    fn mask_spans(&self, text: &str, at_end: bool) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for s in self.spans(text, at_end) {
            out.push_str(&text[at..s.start]);
            out.push_str(&self.marker(s.secret));
            at = s.end;
        }
        out.push_str(&text[at..]);
        out
    }

    /// Mask a string in place.
    pub fn mask_in_place(&self, text: &mut String) {
        if !self.is_empty() {
            *text = self.mask(text);
        }
    }

    /// The names of the secrets found in `text`, in declaration order.
    pub fn names_in(&self, text: &str) -> Vec<&str> {
        let mut hit = vec![false; self.names.len()];
        for s in self.occurrences(text, false) {
            hit[s.secret] = true;
        }
        self.names
            .iter()
            .zip(hit)
            .filter_map(|(n, h)| h.then_some(n.as_str()))
            .collect()
    }

    /// Mask every string (and object key) of a JSON document.
    pub fn mask_json(&self, v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        if self.is_empty() {
            return v.clone();
        }
        match v {
            Value::String(s) => Value::String(self.mask(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.mask_json(x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (self.mask(k), self.mask_json(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The names of the secrets in a JSON document (its strings and keys).
    fn names_in_json(&self, v: &serde_json::Value, into: &mut Vec<String>) {
        use serde_json::Value;
        match v {
            Value::String(s) => self.add_names(s, into),
            Value::Array(a) => a.iter().for_each(|x| self.names_in_json(x, into)),
            Value::Object(o) => {
                for (k, x) in o {
                    self.add_names(k, into);
                    self.names_in_json(x, into);
                }
            }
            _ => {}
        }
    }

    fn add_names(&self, text: &str, into: &mut Vec<String>) {
        for n in self.names_in(text) {
            if !into.iter().any(|x| x == n) {
                into.push(n.to_string());
            }
        }
    }

    /// A non-stream event, masked. Stdout and stderr chunks go through a [`StreamMasker`]
    /// ([`EventMasker`] does both).
    pub fn mask_event(&self, ev: &Event) -> Event {
        let mut ev = ev.clone();
        if self.is_empty() {
            return ev;
        }
        match &mut ev {
            Event::Started { .. } => {}
            Event::Stdout { data } | Event::Stderr { data } => self.mask_in_place(data),
            Event::Cli(c) => c.argv.iter_mut().for_each(|a| self.mask_in_place(a)),
            Event::Denied(d) => self.mask_denial(d),
            Event::Limit { limit, detail } => {
                self.mask_in_place(limit);
                self.mask_in_place(detail);
            }
        }
        ev
    }

    fn mask_denial(&self, d: &mut Denial) {
        match d {
            Denial::Cli { argv, .. } => argv.iter_mut().for_each(|a| self.mask_in_place(a)),
            Denial::Net { host, .. } => self.mask_in_place(host),
            Denial::Dns { name } => self.mask_in_place(name),
            Denial::Write { path, reason, .. } => {
                self.mask_in_place(path);
                reason.iter_mut().for_each(|r| self.mask_in_place(r));
            }
            Denial::Http { host, path, .. } => {
                self.mask_in_place(host);
                self.mask_in_place(path);
            }
            Denial::Secret { to, place, .. } => {
                self.mask_in_place(to);
                self.mask_in_place(place);
            }
        }
    }

    /// Mask what a result shows about the run — stdout, stderr, CLI calls, refusals, the error,
    /// the network report, the paths written back — and leave its data alone: the output
    /// document and the written files' contents.
    pub fn mask_result(&self, r: &mut RunResult) {
        if self.is_empty() {
            return;
        }
        r.stdout = self.mask_stream(&r.stdout);
        r.stderr = self.mask_stream(&r.stderr);
        for c in &mut r.cli_calls {
            c.argv.iter_mut().for_each(|a| self.mask_in_place(a));
        }
        r.denied.iter_mut().for_each(|d| self.mask_denial(d));
        r.insist_missing
            .iter_mut()
            .for_each(|s| self.mask_in_place(s));
        if let Some(f) = &mut r.forged {
            f.reasons.iter_mut().for_each(|s| self.mask_in_place(s));
        }
        if let Some(e) = &mut r.error {
            self.mask_in_place(&mut e.message);
            if let Some(h) = &mut e.hint {
                self.mask_in_place(h);
            }
        }
        if let Some(net) = &mut r.network {
            for l in &mut net.lookups {
                self.mask_in_place(&mut l.name);
            }
            for f in net.contacted.iter_mut().chain(net.denied.iter_mut()) {
                f.names.iter_mut().for_each(|n| self.mask_in_place(n));
            }
        }
        for f in &mut r.written {
            self.mask_in_place(&mut f.path);
        }
    }

    /// Warnings, naming secrets and never showing them: the secrets found in the output document
    /// and in the files written back (which band leaves as the script made them), and the
    /// secrets too short to be masked. Call before [`Masker::mask_result`] (it masks the paths).
    pub fn warnings(&self, r: &RunResult) -> Vec<String> {
        let mut out: Vec<String> = self
            .short
            .iter()
            .map(|n| {
                format!(
                    "the secret {n} is shorter than {MIN_SECRET_BYTES} bytes, so band does not mask it in logs or the ledger"
                )
            })
            .collect();
        if self.is_empty() {
            return out;
        }
        let mut in_output = Vec::new();
        if let Some(v) = &r.output {
            self.names_in_json(v, &mut in_output);
        }
        for n in in_output {
            out.push(format!(
                "the output contains the secret {n} (band masks secrets in logs, not in output)"
            ));
        }
        for f in &r.written {
            let Ok(data) = STANDARD.decode(&f.data) else {
                continue;
            };
            let text = String::from_utf8_lossy(&data);
            for n in self.names_in(&text) {
                out.push(format!(
                    "the file {} written back contains the secret {n}",
                    self.mask(&f.path)
                ));
            }
        }
        out
    }

    /// A masker of one stream (stdout or stderr).
    pub fn stream(&self) -> StreamMasker<'_> {
        StreamMasker {
            masker: self,
            raw: String::new(),
            emitted: 0,
            in_mask: false,
        }
    }

    /// A masker of a run's events.
    pub fn events(&self) -> EventMasker<'_> {
        EventMasker {
            masker: self,
            stdout: self.stream(),
            stderr: self.stream(),
        }
    }
}

/// One way a value is written out whole: what it is, and the texts of a value in it (one per
/// variant).
type Encoding = fn(&[u8]) -> Vec<String>;

/// The ways a value is written out whole. Each text is then matched with any of its characters
/// escaped ([`ESCAPES`]): base64 then percent-encoded is the base64 row with the percent escape.
pub const ENCODINGS: &[(&str, Encoding)] = &[
    ("as it is, and each line of a multi-line value", plain),
    ("base64, standard and URL-safe, padded or not", base64_whole),
    (
        "base64 inside a longer blob, at each byte offset",
        base64_inside,
    ),
    ("hex, lower and upper case", hex),
];

/// One way a character of a form may be escaped: the texts it may appear as instead.
type Escape = fn(char) -> Vec<String>;

/// The ways any one character of a form may be escaped, each independently of the others. An
/// escape with a `%` in it may be percent-encoded once more (`%252F`: a URL quoted twice).
pub const ESCAPES: &[(&str, Escape)] = &[
    (
        "percent-encoded UTF-8 bytes, upper or lower-case hex",
        percent_char,
    ),
    ("`+` for a space (form encoding)", plus_for_space),
    ("JSON `\\uXXXX`, upper or lower-case hex", json_unicode),
    (
        "JSON's short escapes (`\\/`, `\\\"`, `\\\\`, `\\n`…)",
        json_short,
    ),
];

/// The texts of one value to mask (before the length filter).
fn forms(value: &str) -> Vec<String> {
    ENCODINGS
        .iter()
        .flat_map(|(_, encode)| encode(value.as_bytes()))
        .collect()
}

fn plain(value: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(value);
    let mut out = vec![text.to_string()];
    if text.contains('\n') {
        out.extend(
            text.lines()
                .map(|l| l.trim_end_matches('\r').trim())
                .filter(|l| !l.is_empty())
                .map(String::from),
        );
    }
    out
}

fn base64_whole(value: &[u8]) -> Vec<String> {
    [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD]
        .iter()
        .map(|e| e.encode(value))
        .collect()
}

fn base64_inside(value: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for offset in 0..3 {
            out.push(embedded_base64(engine, value, offset));
        }
    }
    out
}

fn hex(value: &[u8]) -> Vec<String> {
    let lower: String = hex::encode(value);
    vec![lower.to_uppercase(), lower]
}

fn percent_char(c: char) -> Vec<String> {
    let mut buf = [0u8; 4];
    let bytes = c.encode_utf8(&mut buf).as_bytes();
    vec![percent_bytes(bytes, true), percent_bytes(bytes, false)]
}

fn plus_for_space(c: char) -> Vec<String> {
    if c == ' ' {
        vec!["+".into()]
    } else {
        Vec::new()
    }
}

fn json_unicode(c: char) -> Vec<String> {
    let mut units = [0u16; 2];
    let units = c.encode_utf16(&mut units);
    let lower = units.iter().map(|u| format!("\\u{u:04x}")).collect();
    let upper = units.iter().map(|u| format!("\\u{u:04X}")).collect();
    vec![lower, upper]
}

fn json_short(c: char) -> Vec<String> {
    let e = match c {
        '/' => "\\/",
        '"' => "\\\"",
        '\\' => "\\\\",
        '\u{8}' => "\\b",
        '\u{c}' => "\\f",
        '\n' => "\\n",
        '\r' => "\\r",
        '\t' => "\\t",
        _ => return Vec::new(),
    };
    vec![e.into()]
}

/// The base64 characters of `value` placed `offset` bytes into a 3-byte group of a longer
/// encoded blob: only those whose 6 bits all come from `value`.
fn embedded_base64(engine: &impl base64::Engine, value: &[u8], offset: usize) -> String {
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(value);
    let encoded = engine.encode(&padded);
    // Character i covers bits [6i, 6i + 6); `value` covers bits [8 offset, 8 (offset + len)).
    let first = (8 * offset).div_ceil(6);
    let end = (8 * (offset + value.len())) / 6;
    encoded.get(first..end).unwrap_or_default().to_string()
}

/// `value` percent-encoded: RFC 3986 unreserved characters as they are, every other byte `%XX`
/// (`upper` or lower-case hex).
#[cfg(test)]
fn percent_encode(value: &[u8], upper: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for &b in value {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&percent_bytes(&[b], upper)),
        }
    }
    out
}

/// Every byte `%XX`.
fn percent_bytes(bytes: &[u8], upper: bool) -> String {
    bytes
        .iter()
        .map(|b| {
            if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

/// One text to mask, and what it matches: each character as itself or any of its escapes.
#[derive(Clone)]
struct Form {
    text: String,
    /// Per character of `text`: the texts it may appear as (itself first).
    units: Vec<Vec<String>>,
    /// The longest text it matches, in bytes.
    longest: usize,
    /// The bytes a match can start with.
    first: [bool; 256],
}

/// How far a form matches from a position.
enum Reach {
    /// A whole match, ending here (the longest one).
    Whole(usize),
    /// The text ended inside a possible match.
    Cut,
    No,
}

impl Form {
    fn new(text: &str) -> Form {
        let units: Vec<Vec<String>> = text
            .chars()
            .map(|c| {
                let mut alts = vec![c.to_string()];
                for (_, escape) in ESCAPES {
                    for a in escape(c) {
                        let twice = a.replace('%', "%25");
                        for a in [a, twice] {
                            if !alts.contains(&a) {
                                alts.push(a);
                            }
                        }
                    }
                }
                alts
            })
            .collect();
        let longest = units
            .iter()
            .map(|u| u.iter().map(String::len).max().unwrap_or(0))
            .sum();
        let mut first = [false; 256];
        for a in units.first().into_iter().flatten() {
            if let Some(&b) = a.as_bytes().first() {
                first[usize::from(b)] = true;
            }
        }
        Form {
            text: text.to_string(),
            units,
            longest,
            first,
        }
    }

    /// Match from `start`: every way of reading the units is followed at once (the positions
    /// reached after each unit), so an ambiguous text (`%25` is `%` then `25`, or an escaped `%`)
    /// costs no backtracking.
    fn reach(&self, text: &[u8], start: usize) -> Reach {
        let mut at = vec![start];
        let mut cut = false;
        for unit in &self.units {
            let mut next: Vec<usize> = Vec::new();
            for &p in &at {
                let rest = &text[p..];
                for alt in unit {
                    let a = alt.as_bytes();
                    if rest.starts_with(a) {
                        if !next.contains(&(p + a.len())) {
                            next.push(p + a.len());
                        }
                    } else if a.starts_with(rest) {
                        cut = true;
                    }
                }
            }
            if next.is_empty() {
                return if cut { Reach::Cut } else { Reach::No };
            }
            at = next;
        }
        Reach::Whole(at.into_iter().max().unwrap_or(start))
    }
}

/// Masks one stream that arrives in chunks; see the module docs. Text is emitted only once it is
/// certain no secret could start in it, so a value split across chunks is masked like a whole one.
pub struct StreamMasker<'a> {
    masker: &'a Masker,
    /// What has been seen and not yet dropped: the last `longest − 1` bytes already emitted
    /// (so a secret that started in them is still recognised), then what is held back.
    raw: String,
    /// How much of `raw` has been emitted.
    emitted: usize,
    /// Did the emitted text end inside a masked stretch (so its marker is already out)?
    in_mask: bool,
}

impl StreamMasker<'_> {
    /// Take a chunk; return what can be shown now (possibly empty).
    pub fn push(&mut self, chunk: &str) -> String {
        if self.masker.is_empty() {
            return chunk.to_string();
        }
        self.raw.push_str(chunk);
        let hold = self.masker.longest - 1;
        let mut cut = self.raw.len().saturating_sub(hold);
        while !self.raw.is_char_boundary(cut) {
            cut -= 1;
        }
        // No form spans a line break (unless a value does): whole lines can go at once.
        if !self.masker.multi_line
            && let Some(nl) = self.raw.rfind('\n')
        {
            cut = cut.max(nl + 1);
        }
        self.emit(cut, false)
    }

    /// The end of the stream: everything still held back.
    pub fn finish(&mut self) -> String {
        if self.masker.is_empty() {
            return String::new();
        }
        self.emit(self.raw.len(), true)
    }

    /// Emit `raw[emitted..cut]`, masked, and drop what no secret can reach back to any more.
    fn emit(&mut self, cut: usize, at_end: bool) -> String {
        if cut <= self.emitted {
            return String::new();
        }
        let mut out = String::new();
        let mut at = self.emitted;
        for s in self.masker.spans(&self.raw, at_end) {
            if s.end <= self.emitted || s.start >= cut {
                continue;
            }
            if s.start > at {
                out.push_str(&self.raw[at..s.start]);
            }
            // A stretch that began before this emission already has its marker out.
            if !(s.start < self.emitted && self.in_mask) {
                out.push_str(&self.masker.marker(s.secret));
            }
            at = s.end.min(cut);
            self.in_mask = s.end > cut;
        }
        if at < cut {
            out.push_str(&self.raw[at..cut]);
            self.in_mask = false;
        }
        self.emitted = cut;
        let mut drop = self.emitted.saturating_sub(self.masker.longest - 1);
        while !self.raw.is_char_boundary(drop) {
            drop -= 1;
        }
        self.raw.drain(..drop);
        self.emitted -= drop;
        out
    }
}

/// Masks a run's events as they stream: stdout and stderr through a [`StreamMasker`] each, the
/// others whole.
pub struct EventMasker<'a> {
    masker: &'a Masker,
    stdout: StreamMasker<'a>,
    stderr: StreamMasker<'a>,
}

impl EventMasker<'_> {
    /// The event, masked; `None` for a chunk held back entirely.
    pub fn event(&mut self, ev: &Event) -> Option<Event> {
        let (stream, data, stdout) = match ev {
            Event::Stdout { data } => (&mut self.stdout, data, true),
            Event::Stderr { data } => (&mut self.stderr, data, false),
            other => return Some(self.masker.mask_event(other)),
        };
        let data = stream.push(data);
        chunk(data, stdout)
    }

    /// What the streams still hold, at the end of the run.
    pub fn finish(&mut self) -> Vec<Event> {
        let out = self.stdout.finish();
        let err = self.stderr.finish();
        [chunk(out, true), chunk(err, false)]
            .into_iter()
            .flatten()
            .collect()
    }
}

fn chunk(data: String, stdout: bool) -> Option<Event> {
    match (data.is_empty(), stdout) {
        (true, _) => None,
        (false, true) => Some(Event::Stdout { data }),
        (false, false) => Some(Event::Stderr { data }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{CliCall, ErrorInfo, FileEntry, Layer, Status};

    const TOKEN: &str = "s3cr3t-T0ken/with+chars and=more";

    fn masker(pairs: &[(&str, &str)]) -> Masker {
        Masker::new(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn token() -> Masker {
        masker(&[("TOKEN", TOKEN)])
    }

    /// Every form a test prints the token in.
    fn printed_forms(v: &str) -> Vec<String> {
        let b = v.as_bytes();
        vec![
            v.to_string(),
            STANDARD.encode(b),
            STANDARD_NO_PAD.encode(b),
            URL_SAFE.encode(b),
            URL_SAFE_NO_PAD.encode(b),
            percent_encode(b, true),
            percent_encode(b, false),
            percent_encode(b, true).replace("%20", "+"),
        ]
    }

    #[test]
    fn every_form_is_masked_and_named() {
        let m = token();
        for form in printed_forms(TOKEN) {
            let text = format!("before {form} after\n");
            assert_eq!(
                m.mask(&text),
                "before [secret TOKEN] after\n",
                "form {form}"
            );
        }
    }

    #[test]
    fn a_secret_inside_a_longer_base64_blob_is_masked_at_each_offset() {
        let m = token();
        for prefix in ["", "a", "ab", "abc", "abcd"] {
            for suffix in ["", "x", "xy", "xyz"] {
                let blob = format!("{prefix}{TOKEN}{suffix}");
                for enc in [STANDARD.encode(&blob), URL_SAFE_NO_PAD.encode(&blob)] {
                    let masked = m.mask(&enc);
                    assert!(
                        masked.contains("[secret TOKEN]"),
                        "{prefix}|{suffix}: {masked}"
                    );
                    // No run of the secret's own encoding survives: what is left is at most
                    // the prefix's and suffix's characters, and two boundary characters.
                    let left = masked.replace("[secret TOKEN]", "");
                    assert!(
                        left.len() <= (prefix.len() + suffix.len()).div_ceil(3) * 4 + 4,
                        "{prefix}|{suffix}: {masked}"
                    );
                }
            }
        }
    }

    #[test]
    fn overlapping_and_adjacent_secrets_are_masked_as_one_stretch() {
        let m = masker(&[("A", "abcdef"), ("B", "defghi")]);
        assert_eq!(m.mask("xx abcdefghi yy"), "xx [secret A] yy");
        assert_eq!(m.mask("abcdefabcdef"), "[secret A]");
        // A value that overlaps itself.
        let m = masker(&[("R", "abab")]);
        assert_eq!(m.mask("-ababab-"), "-[secret R]-");
    }

    #[test]
    fn several_secrets_are_each_named() {
        let m = masker(&[("ONE", "first-value"), ("TWO", "second-value")]);
        assert_eq!(
            m.mask("first-value and second-value"),
            "[secret ONE] and [secret TWO]"
        );
        assert_eq!(m.names_in("x second-value"), vec!["TWO"]);
        assert_eq!(m.names_in("nothing"), Vec::<&str>::new());
    }

    #[test]
    fn short_values_are_not_masked_and_said_so() {
        let m = masker(&[("PIN", "123"), ("EMPTY", ""), ("TOKEN", TOKEN)]);
        assert_eq!(m.not_masked(), ["PIN".to_string()]);
        assert_eq!(m.mask("pin 123"), "pin 123");
        let r = RunResult::setup_failed("r", Layer::Io, "", None);
        let w = m.warnings(&r);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("PIN") && !w[0].contains("123"), "{w:?}");
        // Debug shows names, never values.
        let dbg = format!("{m:?}");
        assert!(dbg.contains("TOKEN") && !dbg.contains(TOKEN), "{dbg}");
    }

    #[test]
    fn multi_line_values_are_masked_line_by_line_too() {
        let key = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\r\nAQEFAASCBKcwggSjAgEAAoIB\n-----END KEY-----";
        let m = masker(&[("KEY", key)]);
        let printed = "line: AQEFAASCBKcwggSjAgEAAoIB\n";
        assert_eq!(m.mask(printed), "line: [secret KEY]\n");
    }

    /// Feed `text` to a stream masker in the given chunk sizes; return what came out.
    fn streamed(m: &Masker, text: &str, sizes: &[usize]) -> String {
        let mut s = m.stream();
        let mut out = String::new();
        let mut rest = text;
        let mut i = 0;
        while !rest.is_empty() {
            let mut n = sizes[i % sizes.len()].min(rest.len());
            while !rest.is_char_boundary(n) {
                n += 1;
            }
            out.push_str(&s.push(&rest[..n]));
            rest = &rest[n..];
            i += 1;
        }
        out.push_str(&s.finish());
        out
    }

    #[test]
    fn a_secret_split_across_chunks_is_masked_as_a_whole_one() {
        let m = masker(&[("TOKEN", TOKEN), ("B", "defghi"), ("A", "abcdef")]);
        let b64 = STANDARD.encode(TOKEN);
        let text = format!("start {TOKEN} mid é{TOKEN}{TOKEN} {b64} abcdefghi end ababab\n");
        let whole = m.mask_stream(&text);
        assert!(!whole.contains(TOKEN) && !whole.contains(&b64), "{whole}");
        for sizes in [
            &[1][..],
            &[2],
            &[3, 7],
            &[5, 1, 13],
            &[TOKEN.len() / 2],
            &[TOKEN.len() - 1],
            &[TOKEN.len()],
            &[TOKEN.len() + 1],
            &[1000],
        ] {
            assert_eq!(streamed(&m, &text, sizes), whole, "chunk sizes {sizes:?}");
        }
    }

    #[test]
    fn a_stream_holds_back_no_more_than_the_longest_form() {
        let m = token();
        let mut s = m.stream();
        let long = "x".repeat(1000);
        let out = s.push(&long);
        assert!(out.len() >= 1000 - m.longest, "{}", out.len());
        assert_eq!(format!("{out}{}", s.finish()), long);
        // Nothing to mask: nothing held back.
        let none = Masker::default();
        assert_eq!(none.stream().push("abc"), "abc");
    }

    #[test]
    fn whole_lines_are_shown_at_once() {
        let m = token();
        let mut s = m.stream();
        assert_eq!(s.push("one line\ntwo"), "one line\n");
        assert_eq!(s.push(&format!(" {TOKEN}\n")), "two [secret TOKEN]\n");
        assert_eq!(s.finish(), "");
        // A value with a line break: no line is safe, the carry-over holds.
        let m = masker(&[("KEY", "line one\nline two")]);
        let mut s = m.stream();
        assert_eq!(s.push("x\nline one"), "");
        assert_eq!(
            format!("{}{}", s.push("\nline two\n"), s.finish()),
            "x\n[secret KEY]\n"
        );
    }

    #[test]
    fn a_stream_cut_in_the_middle_of_a_secret_has_its_end_masked() {
        let m = token();
        let cut = &TOKEN[..12];
        assert_eq!(m.mask_stream(&format!("x {cut}")), "x [secret TOKEN]");
        let mut s = m.stream();
        let shown = format!("{}{}", s.push(&format!("x {cut}")), s.finish());
        assert_eq!(shown, "x [secret TOKEN]");
        // Anywhere else a prefix is just text; so is a prefix shorter than the minimum.
        assert_eq!(m.mask(&format!("{cut} x")), format!("{cut} x"));
        let short = format!("x {}", &TOKEN[..MIN_SECRET_BYTES - 1]);
        assert_eq!(m.mask_stream(&short), short);
        let mut r = RunResult::setup_failed("r", Layer::Io, "", None);
        r.stdout = format!("log {cut}");
        r.stdout_truncated = true;
        m.mask_result(&mut r);
        assert_eq!(r.stdout, "log [secret TOKEN]");
    }

    #[test]
    fn events_are_masked_and_stream_chunks_carried_over() {
        let m = token();
        let mut e = m.events();
        let (a, b) = TOKEN.split_at(10);
        let mut seen = Vec::new();
        for ev in [
            Event::Stdout {
                data: format!("out {a}"),
            },
            Event::Stderr {
                data: format!("err {TOKEN}\n"),
            },
            Event::Stdout {
                data: format!("{b}\n"),
            },
            Event::Cli(CliCall {
                argv: vec!["printf".into(), "%s".into(), TOKEN.into()],
                allowed: true,
                rule: Some("printf *".into()),
                source: None,
            }),
        ] {
            seen.extend(e.event(&ev));
        }
        seen.extend(e.finish());
        let json = serde_json::to_string(&seen).unwrap();
        assert!(!json.contains(TOKEN) && !json.contains(a), "{json}");
        let stdout: String = seen
            .iter()
            .filter_map(|e| match e {
                Event::Stdout { data } => Some(data.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(stdout, "out [secret TOKEN]\n");
        assert!(
            json.contains(r#"["printf","%s","[secret TOKEN]"]"#),
            "{json}"
        );
    }

    #[test]
    fn results_are_masked_but_output_and_files_are_left_and_warned_about() {
        let m = token();
        let mut r = RunResult::setup_failed(
            "r",
            Layer::Io,
            format!("output /t: \"{TOKEN}\" is not a number"),
            None,
        );
        r.status = Status::OutputInvalid;
        r.stdout = format!("{{\"t\":\"{TOKEN}\"}}");
        r.stderr = format!("got {TOKEN}\n");
        r.output = Some(serde_json::json!({ "t": TOKEN }));
        r.cli_calls = vec![CliCall {
            argv: vec!["echo".into(), TOKEN.into()],
            allowed: true,
            rule: None,
            source: None,
        }];
        r.denied = vec![Denial::Dns {
            name: format!("{}.example.test", STANDARD_NO_PAD.encode(TOKEN)),
        }];
        r.written = vec![FileEntry {
            path: "out/t.txt".into(),
            mode: 0o644,
            data: STANDARD.encode(format!("x {TOKEN}")),
        }];
        let warnings = m.warnings(&r);
        assert_eq!(
            warnings,
            vec![
                "the output contains the secret TOKEN (band masks secrets in logs, not in output)",
                "the file out/t.txt written back contains the secret TOKEN",
            ]
        );
        m.mask_result(&mut r);
        let output = r.output.take();
        let data = r.written[0].data.clone();
        r.written.clear();
        let json = serde_json::to_string(&r).unwrap();
        for form in printed_forms(TOKEN) {
            assert!(!json.contains(&form), "{form} in {json}");
        }
        assert_eq!(output, Some(serde_json::json!({ "t": TOKEN })));
        assert_eq!(
            STANDARD.decode(data).unwrap(),
            format!("x {TOKEN}").as_bytes()
        );
        assert_eq!(
            r.error,
            Some(ErrorInfo {
                layer: Layer::Io,
                message: "output /t: \"[secret TOKEN]\" is not a number".into(),
                hint: None
            })
        );
    }

    #[test]
    fn json_documents_are_masked_keys_and_all() {
        let m = token();
        let v = serde_json::json!({ "argv": ["printf", TOKEN], TOKEN: 1 });
        assert_eq!(
            m.mask_json(&v),
            serde_json::json!({ "argv": ["printf", "[secret TOKEN]"], "[secret TOKEN]": 1 })
        );
    }

    const AWS: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const PASSWORD: &str = "pa ss/wörd+\"x\"&y=1";

    /// What real encoders print (python3 3.11, node 20, curl 7.88; Go's net/url rules applied
    /// by hand), and what band shows of it.
    const AWS_PRINTED: &[(&str, &str, &str)] = &[
        (
            "python quote (safe='/')",
            "wJalrXUtnFEMI/K7MDENG%2BbPxRfiCYEXAMPLEKEY",
            "{}",
        ),
        (
            "python quote(safe='')",
            "wJalrXUtnFEMI%2FK7MDENG%2BbPxRfiCYEXAMPLEKEY",
            "{}",
        ),
        (
            "python urlencode (quote_plus)",
            "k=wJalrXUtnFEMI%2FK7MDENG%2BbPxRfiCYEXAMPLEKEY",
            "k={}",
        ),
        (
            "python quote, twice",
            "wJalrXUtnFEMI/K7MDENG%252BbPxRfiCYEXAMPLEKEY",
            "{}",
        ),
        (
            "python b64encode",
            "d0phbHJYVXRuRkVNSS9LN01ERU5HK2JQeFJmaUNZRVhBTVBMRUtFWQ==",
            "{}",
        ),
        (
            "python urlsafe_b64encode, unpadded",
            "d0phbHJYVXRuRkVNSS9LN01ERU5HK2JQeFJmaUNZRVhBTVBMRUtFWQ",
            "{}",
        ),
        (
            "python b64encode of user:secret (Basic)",
            "Basic dXNlcjp3SmFsclhVdG5GRU1JL0s3TURFTkcrYlB4UmZpQ1lFWEFNUExFS0VZ",
            "Basic dXNlcjp{}",
        ),
        (
            "python b64encode of a:secret!",
            "YTp3SmFsclhVdG5GRU1JL0s3TURFTkcrYlB4UmZpQ1lFWEFNUExFS0VZIQ==",
            "YTp{}IQ==",
        ),
        (
            "python b64encode of ab:secret!?",
            "YWI6d0phbHJYVXRuRkVNSS9LN01ERU5HK2JQeFJmaUNZRVhBTVBMRUtFWSE/",
            "YWI6{}SE/",
        ),
        (
            "python quote of b64encode",
            "d0phbHJYVXRuRkVNSS9LN01ERU5HK2JQeFJmaUNZRVhBTVBMRUtFWQ%3D%3D",
            "{}",
        ),
        (
            "python quote(safe='') of a Basic header",
            "Basic%20dXNlcjp3SmFsclhVdG5GRU1JL0s3TURFTkcrYlB4UmZpQ1lFWEFNUExFS0VZ",
            "Basic%20dXNlcjp{}",
        ),
        (
            "python bytes.hex",
            "774a616c725855746e46454d492f4b374d44454e472b62507852666943594558414d504c454b4559",
            "{}",
        ),
        (
            "python bytes.hex().upper()",
            "774A616C725855746E46454D492F4B374D44454E472B62507852666943594558414D504C454B4559",
            "{}",
        ),
        (
            "python json.dumps of a quoted URL",
            "\"https://h.test/?t=wJalrXUtnFEMI/K7MDENG%2BbPxRfiCYEXAMPLEKEY\"",
            "\"https://h.test/?t={}\"",
        ),
        (
            "JSON with \\/ (PHP json_encode)",
            "\"wJalrXUtnFEMI\\/K7MDENG+bPxRfiCYEXAMPLEKEY\"",
            "\"{}\"",
        ),
        (
            "JSON with \\u escapes",
            "\"wJalrXUtnFEMI\\u002fK7MDENG\\u002bbPxRfiCYEXAMPLEKEY\"",
            "\"{}\"",
        ),
        (
            "node encodeURIComponent",
            "wJalrXUtnFEMI%2FK7MDENG%2BbPxRfiCYEXAMPLEKEY",
            "{}",
        ),
        (
            "node encodeURI",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "{}",
        ),
        (
            "node Buffer base64url",
            "d0phbHJYVXRuRkVNSS9LN01ERU5HK2JQeFJmaUNZRVhBTVBMRUtFWQ",
            "{}",
        ),
        (
            "curl -G --data-urlencode (lower-case hex)",
            "https://h.test/?x=wJalrXUtnFEMI%2fK7MDENG%2bbPxRfiCYEXAMPLEKEY",
            "https://h.test/?x={}",
        ),
        (
            "Go url.PathEscape's rules (+ kept)",
            "wJalrXUtnFEMI%2FK7MDENG+bPxRfiCYEXAMPLEKEY",
            "{}",
        ),
    ];

    /// What real encoders print (python3 3.11, node 20, curl 7.88; Go's net/url rules applied
    /// by hand), and what band shows of it.
    const PASSWORD_PRINTED: &[(&str, &str, &str)] = &[
        (
            "python quote (safe='/')",
            "pa%20ss/w%C3%B6rd%2B%22x%22%26y%3D1",
            "{}",
        ),
        (
            "python quote_plus",
            "pa+ss%2Fw%C3%B6rd%2B%22x%22%26y%3D1",
            "{}",
        ),
        (
            "python quote, twice",
            "pa%2520ss/w%25C3%25B6rd%252B%2522x%2522%2526y%253D1",
            "{}",
        ),
        (
            "python b64encode of user:secret (Basic)",
            "Basic dXNlcjpwYSBzcy93w7ZyZCsieCImeT0x",
            "Basic dXNlcjp{}",
        ),
        (
            "python b64encode of ab:secret!?",
            "YWI6cGEgc3Mvd8O2cmQrIngiJnk9MSE/",
            "YWI6{}SE/",
        ),
        (
            "python bytes.hex().upper()",
            "70612073732F77C3B672642B22782226793D31",
            "{}",
        ),
        (
            "python json.dumps (ensure_ascii)",
            "\"pa ss/w\\u00f6rd+\\\"x\\\"&y=1\"",
            "\"{}\"",
        ),
        (
            "JSON with \\/ and \\u escapes",
            "\"pa\\u0020ss\\/w\\u00F6rd\\u002b\\u0022x\\u0022\\u0026y\\u003d1\"",
            "\"{}\"",
        ),
        (
            "node encodeURIComponent",
            "pa%20ss%2Fw%C3%B6rd%2B%22x%22%26y%3D1",
            "{}",
        ),
        ("node encodeURI", "pa%20ss/w%C3%B6rd+%22x%22&y=1", "{}"),
        (
            "node JSON.stringify",
            "\"pa ss/wörd+\\\"x\\\"&y=1\"",
            "\"{}\"",
        ),
        (
            "curl -G --data-urlencode (lower-case hex)",
            "pa+ss%2fw%c3%b6rd%2b%22x%22%26y%3d1",
            "{}",
        ),
        (
            "Go url.QueryEscape's rules",
            "pa+ss%2Fw%C3%B6rd%2B%22x%22%26y%3D1",
            "{}",
        ),
        (
            "Go url.PathEscape's rules",
            "pa%20ss%2Fw%C3%B6rd+%22x%22&y=1",
            "{}",
        ),
    ];

    #[test]
    fn what_real_encoders_print_is_masked() {
        let m = masker(&[("AWS", AWS), ("PW", PASSWORD)]);
        for (name, table) in [("AWS", AWS_PRINTED), ("PW", PASSWORD_PRINTED)] {
            for (encoder, printed, masked) in table {
                let shown = m.mask(&format!("curl 'https://h.test/{printed}' >x"));
                let want = format!(
                    "curl 'https://h.test/{}' >x",
                    masked.replace("{}", &format!("[secret {name}]"))
                );
                assert_eq!(shown, want, "{encoder}: {printed}");
            }
        }
    }

    /// Each row of the tables is masked, alone and combined: every text of every encoding, with
    /// every character escaped by each escape in turn (where it changes it), and with the
    /// escapes alternating (a library that keeps some characters and escapes others).
    #[test]
    fn every_encoding_with_every_escape_is_masked() {
        let m = masker(&[("PW", PASSWORD)]);
        for (what, encode) in ENCODINGS {
            for text in encode(PASSWORD.as_bytes()) {
                for (how, escape) in ESCAPES {
                    for variant in 0..2 {
                        let escaped: String = text
                            .chars()
                            .enumerate()
                            .map(|(i, c)| match escape(c).get(variant) {
                                Some(e) if i % 2 == 0 || variant == 0 => e.clone(),
                                _ => c.to_string(),
                            })
                            .collect();
                        assert_eq!(
                            m.mask(&format!("<{escaped}>")),
                            "<[secret PW]>",
                            "{what}, {how}: {escaped}"
                        );
                    }
                }
            }
        }
    }

    /// What is not the secret stays: a near miss in each encoding, a different escape, a cut
    /// value in the middle of a text, and ordinary URLs and JSON.
    #[test]
    fn a_near_miss_is_not_masked() {
        let m = masker(&[("AWS", AWS)]);
        // One character different, in the middle (a base64 blob that shares most of its bytes
        // with the secret shows most of it, and is masked).
        let near = "wJalrXUtnFEMI/K7MDENH+bPxRfiCYEXAMPLEKEY";
        for text in [
            near.to_string(),
            near.replace('/', "%2F").replace('+', "%2B"),
            near.replace('/', "\\u002f"),
            STANDARD.encode(near),
            hex::encode(near.as_bytes()),
            // `,` escaped where the secret has `+`.
            AWS.replace('+', "%2C"),
            // `+` is a space only where the secret has a space.
            AWS.replace('/', "+"),
            // A `%` escape with a third hex digit is `%2F` then `0`.
            format!("{}0", &AWS.replace('/', "%2F")[..16]),
            // The secret without its last character, followed by more text.
            format!("{} and more", &AWS[..AWS.len() - 1]),
            "https://h.test/a%2Fb?q=1+2&r=%20x".into(),
            r#"{"a":"b\/c","d":"\u002b"}"#.into(),
        ] {
            assert_eq!(m.mask(&text), text);
        }
    }
}
