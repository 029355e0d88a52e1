//! The red-team suite, round 3 (issue 36): what a hostile skill folder, a hostile agent or a local
//! user does to the tools around the run. One module per class of attack; each test builds the
//! hostile folder or input itself and asserts what the tool shows, writes or refuses.

mod drafts;
mod gate_record;
mod ledger;
mod links;
mod masking;
mod remote;
mod terminal;
