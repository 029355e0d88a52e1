//! Layout checks for upstream Bands skills read in place (see [`crate::skill`]): a script whose
//! contract is in two places.

use std::path::Path;

use crate::contract::SchemaSet;
use crate::diag::{Code, Diagnostic, Loc};

/// A co-located `scripts/resources/<script>/{input,output}_schema.json` next to a
/// `schemas/{input,output}/<script>.json`: the latter is the contract (run, help, MCP), so the
/// former is dead and gets a warning.
pub fn check_contract_files(root: &Path, script: &str) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for kind in ["input", "output"] {
        let [canonical, colocated] = SchemaSet::contract_candidates(kind, script);
        if root.join(&canonical).is_file() && root.join(&colocated).is_file() {
            out.push(
                Diagnostic::new(
                    Code::OrphanSchema,
                    root.join(&colocated),
                    Loc::FILE,
                    format!(
                        "{kind} schema for `{script}` is not used: {canonical} is its contract"
                    ),
                )
                .with_hint(format!("remove one of {colocated} and {canonical}")),
            );
        }
    }
    out
}
