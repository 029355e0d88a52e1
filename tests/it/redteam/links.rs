//! Red-team round 3 (issue 36): links.
