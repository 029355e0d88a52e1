//! What a run's egress proxy refused (and its DNS stub, for a placeholder in a name): streamed as
//! it happens and kept for the run's result, bounded however many refusals the run provokes.
//! band-server runs them outside the run's cgroup, so a run that sends a million refused
//! requests with 60 KB paths must not make it hold them all: past [`MAX_KEPT`] a refusal is only
//! counted ([`Refusals::dropped`], which the run adds to its count of denials, as the run loop
//! counts the CLI denials past `MAX_CALLS_KEPT`), and every text the run chose is cut
//! ([`bounded`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use band::proto::Denial;

use super::OnDenial;

/// Most refusals a run's proxy and stub keep and stream: those of the run loop
/// (`MAX_CALLS_KEPT`). The ones after are counted, never kept or streamed.
pub const MAX_KEPT: usize = 10_000;

/// The longest request path a refusal names: its first bytes, then `… N bytes` (its length).
pub const MAX_PATH: usize = 1024;

/// The longest of the other texts a refusal takes from the run (a method, a `Host`, a header's
/// name), cut as [`MAX_PATH`] cuts a path. A DNS name is at most 253 bytes: never cut.
pub const MAX_TEXT: usize = 256;

/// `text` whole when it is at most `max` bytes, else its first `max` bytes or fewer (never
/// inside a character) and `… N bytes` (its whole length).
pub fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… {} bytes", &text[..cut], text.len())
}

/// `d` with each text the run chose cut to its bound ([`MAX_PATH`] for a request's path, `text`
/// for the others).
pub fn bounded(d: Denial, path: usize, text: usize) -> Denial {
    let cut = |s: String| {
        if s.len() > text { shorten(&s, text) } else { s }
    };
    match d {
        Denial::Http {
            method,
            host,
            port,
            https,
            path: p,
            rule,
        } => Denial::Http {
            method: cut(method),
            host: cut(host),
            port,
            https,
            path: if p.len() > path { shorten(&p, path) } else { p },
            rule,
        },
        Denial::Net { host, port, rule } => Denial::Net {
            host: cut(host),
            port,
            rule,
        },
        Denial::Dns { name } => Denial::Dns { name: cut(name) },
        Denial::Secret { name, to, place } => Denial::Secret {
            name: cut(name),
            to: cut(to),
            place: cut(place),
        },
        other @ (Denial::Cli { .. } | Denial::Write { .. }) => other,
    }
}

/// The refusals kept, and how many there were in all.
#[derive(Debug)]
struct Kept {
    denials: Vec<Denial>,
    total: u64,
}

/// The refusals of one run's proxy and stub (one for both: one bound).
pub struct Refusals {
    kept: Mutex<Kept>,
    max: usize,
    /// Told each refusal kept, as it happens (the run's event stream).
    live: Option<Arc<OnDenial>>,
}

impl std::fmt::Debug for Refusals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refusals")
            .field("kept", &self.kept)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Refusals {
    /// Keeping and streaming at most `max` refusals.
    pub fn new(max: usize, live: Option<Arc<OnDenial>>) -> Refusals {
        Refusals {
            kept: Mutex::new(Kept {
                denials: Vec::new(),
                total: 0,
            }),
            max,
            live,
        }
    }

    /// Count `d`; while fewer than the bound are kept, cut its texts ([`bounded`]), stream it and
    /// keep it (under one lock, so the stream's order is the list's). Returns it as kept, cut.
    pub fn record(&self, d: Denial) -> Denial {
        let d = bounded(d, MAX_PATH, MAX_TEXT);
        if let Ok(mut k) = self.kept.lock() {
            k.total += 1;
            if k.denials.len() < self.max {
                if let Some(live) = &self.live {
                    live(&d);
                }
                k.denials.push(d.clone());
            }
        }
        d
    }

    /// The refusals kept, in order.
    pub fn denials(&self) -> Vec<Denial> {
        self.kept
            .lock()
            .map(|k| k.denials.clone())
            .unwrap_or_default()
    }

    /// How many refusals were neither kept nor streamed (past the bound).
    pub fn dropped(&self) -> u64 {
        self.kept
            .lock()
            .map(|k| k.total - k.denials.len() as u64)
            .unwrap_or(0)
    }
}

/// The refusals of `recorded` not in `streamed` (each streamed one accounts for one recorded
/// equal to it), in `recorded`'s order: the end of a run adds the refusals whose event had not
/// reached the run loop yet. Linear: each is looked up in a count, never searched for.
pub fn not_streamed(streamed: &[Denial], recorded: Vec<Denial>) -> Vec<Denial> {
    // `Denial` has no `Hash`; its derived `Debug` text tells any two apart (strings quoted).
    let key = |d: &Denial| format!("{d:?}");
    let mut left: HashMap<String, usize> = HashMap::with_capacity(streamed.len());
    for s in streamed {
        *left.entry(key(s)).or_default() += 1;
    }
    recorded
        .into_iter()
        .filter(|d| match left.get_mut(&key(d)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn get(path: &str) -> Denial {
        Denial::Http {
            method: "GET".into(),
            host: "api.example.test".into(),
            port: 443,
            https: true,
            path: path.into(),
            rule: None,
        }
    }

    /// A run that provokes more refusals than the bound: the first ones are streamed and kept,
    /// the rest only counted; a long path is kept cut. (The proxy kept and streamed each one,
    /// whole, however many.)
    #[test]
    fn refusals_past_the_bound_are_counted_not_kept_or_streamed_and_paths_are_cut() {
        let streamed = Arc::new(Mutex::new(Vec::new()));
        let told = streamed.clone();
        let live: Arc<OnDenial> = Arc::new(move |d: &Denial| {
            if let Ok(mut v) = told.lock() {
                v.push(d.clone());
            }
        });
        let r = Refusals::new(3, Some(live));
        let long = format!("/{}", "a".repeat(60_000));
        for i in 0..10 {
            r.record(get(&format!("/{i}")));
        }
        r.record(get(&long));
        let kept = r.denials();
        assert_eq!(kept, [get("/0"), get("/1"), get("/2")]);
        assert_eq!(r.dropped(), 8);
        assert_eq!(streamed.lock().map(|v| v.clone()).ok(), Some(kept));

        let r = Refusals::new(3, None);
        r.record(get(&long));
        let Denial::Http { path, .. } = &r.denials()[0] else {
            panic!("{:?}", r.denials());
        };
        assert_eq!(path, &format!("/{}… 60001 bytes", "a".repeat(MAX_PATH - 1)));
        assert_eq!(r.dropped(), 0);
    }

    #[test]
    fn each_text_the_run_chose_is_cut() {
        let long = "x".repeat(1000);
        assert_eq!(
            bounded(
                Denial::Net {
                    host: long.clone(),
                    port: Some(80),
                    rule: None
                },
                8,
                4
            ),
            Denial::Net {
                host: "xxxx… 1000 bytes".into(),
                port: Some(80),
                rule: None
            }
        );
        assert_eq!(
            bounded(
                Denial::Secret {
                    name: "T".into(),
                    to: format!("{long}:443"),
                    place: format!("header {long} (plain HTTP)"),
                },
                8,
                4
            ),
            Denial::Secret {
                name: "T".into(),
                to: "xxxx… 1004 bytes".into(),
                place: "head… 1020 bytes".into(),
            }
        );
        let Denial::Http { method, path, .. } = bounded(
            Denial::Http {
                method: long.clone(),
                host: "h".into(),
                port: 80,
                https: false,
                path: format!("/{long}"),
                rule: None,
            },
            8,
            4,
        ) else {
            panic!("not http");
        };
        assert_eq!(
            (method.as_str(), path.as_str()),
            ("xxxx… 1000 bytes", "/xxxxxxx… 1001 bytes")
        );
        // What fits is left as it is.
        assert_eq!(bounded(get("/v1/x"), 8, 16), get("/v1/x"));
    }

    #[test]
    fn shorten_keeps_a_prefix_whole_characters_and_the_length() {
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(shorten("abcdef", 3), "abc… 6 bytes");
        // `é` is two bytes: never cut inside it.
        assert_eq!(shorten("aébc", 2), "a… 5 bytes");
    }

    /// The end of a run adds the recorded refusals no event told yet, one for one, whatever
    /// their order and however many are equal.
    #[test]
    fn not_streamed_is_the_recorded_minus_the_streamed_one_for_one() {
        let (a, b, c) = (get("/a"), get("/b"), get("/c"));
        let recorded = vec![a.clone(), b.clone(), a.clone(), c.clone(), a.clone()];
        assert_eq!(
            not_streamed(&[a.clone(), c.clone(), a.clone()], recorded.clone()),
            [b.clone(), a.clone()]
        );
        assert_eq!(not_streamed(&[], recorded.clone()), recorded);
        assert_eq!(
            not_streamed(&recorded, recorded.clone()),
            Vec::<Denial>::new()
        );
        // A streamed one the list no longer has (past its bound) takes nothing else.
        assert_eq!(not_streamed(&[get("/z")], vec![b.clone()]), [b]);
    }
}
