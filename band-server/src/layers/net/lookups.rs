//! The DNS questions a run asked its stub, for the run's network report and `insist.net`:
//! bounded however many it asks. band-server holds them outside the run's cgroup, and a run may
//! ask hundreds of thousands of random names; so a question asked again is the one lookup it
//! was (its answers added), and past [`MAX_LOOKUPS`] distinct ones the rest are only counted.

use std::collections::HashMap;
use std::net::IpAddr;

use super::dns::Lookup;

/// Most distinct lookups (a name, its type, whether it was allowed) a run's report holds: the
/// run loop's bound for CLI calls (`MAX_CALLS_KEPT`). Past it, lookups are counted only
/// ([`Lookups::dropped`]); the refused ones are still each a denial of the run (the stub tells
/// the run loop each question as it is answered).
pub(crate) const MAX_LOOKUPS: usize = 10_000;

/// Most addresses a lookup holds of each kind (handed to the run, withheld), over its repeats:
/// a name the run's own resolver answers with new addresses each time adds nothing past it.
pub(crate) const MAX_ADDRS: usize = 64;

/// The lookups of a run, distinct, in the order first asked.
#[derive(Debug)]
pub(crate) struct Lookups {
    list: Vec<Lookup>,
    /// Where each (name, type, allowed) is in `list`.
    index: HashMap<(String, String, bool), usize>,
    max: usize,
    max_addrs: usize,
    dropped: u64,
}

impl Default for Lookups {
    fn default() -> Lookups {
        Lookups::new(MAX_LOOKUPS, MAX_ADDRS)
    }
}

impl Lookups {
    /// At most `max` distinct lookups, with at most `max_addrs` addresses of each kind.
    pub(crate) fn new(max: usize, max_addrs: usize) -> Lookups {
        Lookups {
            list: Vec::new(),
            index: HashMap::new(),
            max,
            max_addrs,
            dropped: 0,
        }
    }

    /// One question answered: a new lookup, the answers of a repeat added to the one it
    /// repeats, or (past the bound) a count.
    pub(crate) fn record(&mut self, l: &Lookup) {
        let key = (l.name.clone(), l.qtype.clone(), l.allowed);
        if let Some(&i) = self.index.get(&key) {
            let kept = &mut self.list[i];
            add_addrs(&mut kept.addrs, &l.addrs, self.max_addrs);
            add_addrs(&mut kept.withheld, &l.withheld, self.max_addrs);
            return;
        }
        if self.list.len() >= self.max {
            self.dropped += 1;
            return;
        }
        let mut new = Lookup {
            name: l.name.clone(),
            qtype: l.qtype.clone(),
            allowed: l.allowed,
            addrs: Vec::new(),
            withheld: Vec::new(),
        };
        add_addrs(&mut new.addrs, &l.addrs, self.max_addrs);
        add_addrs(&mut new.withheld, &l.withheld, self.max_addrs);
        self.index.insert(key, self.list.len());
        self.list.push(new);
    }

    /// The lookups kept, in the order first asked.
    pub(crate) fn list(&self) -> &[Lookup] {
        &self.list
    }

    /// The lookups past the bound: new questions neither kept nor merged into one kept.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// `from`'s addresses not in `to` yet, added in order while `to` has fewer than `max`.
fn add_addrs(to: &mut Vec<IpAddr>, from: &[IpAddr], max: usize) {
    for ip in from {
        if to.len() >= max {
            return;
        }
        if !to.contains(ip) {
            to.push(*ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn lookup(name: &str, qtype: &str, allowed: bool, addrs: &[&str]) -> Lookup {
        Lookup {
            name: name.into(),
            qtype: qtype.into(),
            allowed,
            addrs: addrs.iter().filter_map(|a| a.parse().ok()).collect(),
            withheld: vec![],
        }
    }

    /// A run that asks the same names again and again, then more new names than the bound:
    /// repeats are one lookup each (their answers merged, within their own bound), and the
    /// names past the bound are counted, not kept. (The stub's list held every question.)
    #[test]
    fn lookups_are_distinct_and_bounded_and_the_rest_counted() {
        let mut l = Lookups::new(3, 2);
        for _ in 0..100 {
            l.record(&lookup("api.example.test", "A", true, &["192.0.2.1"]));
            l.record(&lookup("evil.test", "A", false, &[]));
        }
        l.record(&lookup(
            "api.example.test",
            "A",
            true,
            &["192.0.2.2", "192.0.2.1"],
        ));
        l.record(&lookup("api.example.test", "A", true, &["192.0.2.3"]));
        l.record(&lookup("api.example.test", "AAAA", true, &["2001:db8::1"]));
        for i in 0..50 {
            l.record(&lookup(&format!("n{i}.test"), "A", false, &[]));
        }
        assert_eq!(
            l.list(),
            [
                lookup("api.example.test", "A", true, &["192.0.2.1", "192.0.2.2"]),
                lookup("evil.test", "A", false, &[]),
                lookup("api.example.test", "AAAA", true, &["2001:db8::1"]),
            ]
        );
        assert_eq!(l.dropped(), 50);
        // A repeat of a kept one past the bound is still merged, never counted as dropped.
        l.record(&lookup("evil.test", "A", false, &[]));
        assert_eq!(l.dropped(), 50);
        assert_eq!(l.list().len(), 3);
    }
}
